"""RaftConnect's Django admin site: users and groups, plus the metadata store page.

Owns the admin site object (installed through :class:`RaftConnectAdminConfig` in
``INSTALLED_APPS`` instead of ``django.contrib.admin``) so the store page gets a
URL under ``/admin/`` and an entry on the admin index. The page itself is
:func:`webapp.connect.store_admin.metadata_store`.
"""
from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.urls import path, reverse

__all__ = ["RaftConnectAdminSite", "RaftConnectAdminConfig"]


class RaftConnectAdminSite(AdminSite):
    """The default admin site plus ``/admin/metadata-store/`` (superusers only)."""

    site_header = "RaftConnect administration"
    site_title = "RaftConnect admin"

    def get_urls(self):
        from webapp.connect.store_admin import metadata_store

        return [path("metadata-store/", self.admin_view(metadata_store), name="metadata-store")] + super().get_urls()

    def get_app_list(self, request, app_label=None):
        """The index's app list, with a "Metadata store" entry for superusers."""
        apps = super().get_app_list(request, app_label)
        if request.user.is_superuser and app_label in (None, "storage"):
            url = reverse("admin:metadata-store")
            apps.append({"name": "Metadata store", "app_label": "storage", "app_url": url,
                         "has_module_perms": True,
                         "models": [{"name": "Active store and switch", "object_name": "MetadataStore",
                                     "admin_url": url, "add_url": None, "view_only": True,
                                     "perms": {"add": False, "change": False, "delete": False, "view": True}}]})
        return apps


class RaftConnectAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`RaftConnectAdminSite` as the default site."""

    default_site = "webapp.admin_site.RaftConnectAdminSite"
