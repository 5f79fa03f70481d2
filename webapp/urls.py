"""Root URLconf: the Django admin and the REST API."""
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("webapp.connect.api.urls")),
]

handler404 = "webapp.connect.api.errors.handler404"
handler500 = "webapp.connect.api.errors.handler500"
