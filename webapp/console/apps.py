"""The console's Django app: registers its task-history sampler with the node's lifecycle."""
from __future__ import annotations

from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    """``webapp.console``: no models; on ready, the node starts and stops the console's history sampler."""

    name = "webapp.console"
    label = "console"

    def ready(self) -> None:
        from webapp.connect.node import add_lifecycle_hook

        from .history import forget, history_for

        add_lifecycle_hook(history_for, forget)
