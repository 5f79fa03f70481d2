"""RaftConnect's Django project: settings, URLs, the Celery app and the apps below.

Apps: ``connect`` (Kafka Connect REST API, Herder, node assembly), ``coordinator``
(group membership and assignment), ``storage`` (metadata stores), ``runtime``
(agent, WorkerTask, Spark), ``connectors`` (plugins).
"""
from .celery import app as celery_app

__all__ = ["celery_app"]
