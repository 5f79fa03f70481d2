"""Root URLconf: the Django admin, the console (its files are served by WhiteNoise) and the REST API."""
from django.contrib import admin
from django.urls import include, path

from webapp.console.views import not_built

urlpatterns = [
    path("admin/", admin.site.urls),
    path("console/", not_built),  # reached only while frontend/dist has not been built
    path("", include("webapp.connect.api.urls")),
]

handler404 = "webapp.connect.api.errors.handler404"
handler500 = "webapp.connect.api.errors.handler500"
