from django.apps import AppConfig


class ConnectConfig(AppConfig):
    """Kafka Connect REST API, the Herder, and the node's assembly (``runnode``)."""

    name = "webapp.connect"
    label = "connect"
