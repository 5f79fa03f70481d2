"""RaftConnect's Django admin site: users and groups, plus the metadata store page.

Owns the admin site object (installed through :class:`RaftConnectAdminConfig` in
``INSTALLED_APPS`` instead of ``django.contrib.admin``) so the store page gets a
URL under ``/admin/`` and an entry on the admin index, and the admin's message
middleware (:class:`LazyMessageMiddleware`). The page itself is
:func:`webapp.connect.store_admin.metadata_store`.
"""
from __future__ import annotations

from django.contrib.admin import AdminSite
from django.contrib.admin.apps import AdminConfig
from django.contrib.messages.middleware import MessageMiddleware
from django.contrib.messages.storage import default_storage
from django.urls import path, reverse
from django.utils.functional import SimpleLazyObject, empty

__all__ = ["RaftConnectAdminSite", "RaftConnectAdminConfig", "LazyMessageMiddleware"]


class LazyMessageMiddleware(MessageMiddleware):
    """Django's ``MessageMiddleware`` whose message storage is made only when a request uses it.

    Django's builds the storage (a cookie signer and a session storage) for every request; only the
    admin's pages add or show messages, while the REST API, nearly every request a node serves,
    never does (~2 % of the leader's CPU per config write under 32 REST clients, issue 16). The
    storage is the same ``MESSAGE_STORAGE`` object behind a lazy proxy, so ``messages.add_message``,
    ``get_messages`` and the admin's templates see what they saw; a request that never touched it
    writes no cookie, as Django's does when there is nothing to store.
    """

    def process_request(self, request) -> None:
        request._messages = SimpleLazyObject(lambda: default_storage(request))

    def process_response(self, request, response):
        messages = getattr(request, "_messages", None)
        if isinstance(messages, SimpleLazyObject) and messages._wrapped is empty:
            return response
        return super().process_response(request, response)


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
