from django.apps import AppConfig


class StorageConfig(AppConfig):
    """The metadata stores (:mod:`webapp.storage`)."""

    name = "webapp.storage"
    label = "storage"

    def ready(self) -> None:
        """Each request thread closes its connections of closed stores when its request ends."""
        from django.core.signals import request_finished

        from .relational.store import close_retired_connections

        request_finished.connect(close_retired_connections, dispatch_uid="raftconnect-retired-store-connections")
