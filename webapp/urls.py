"""Root URLconf: the Django admin and the REST API."""
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("", include("webapp.connect.api.urls")),  # first: Connect's /admin/loggers is not the Django admin
    path("", include("webapp.console.urls")),  # the console's server side sits on top of the REST API
    path("admin/", admin.site.urls),
]

handler404 = "webapp.connect.api.errors.handler404"
handler500 = "webapp.connect.api.errors.handler500"
