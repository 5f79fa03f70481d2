from django.apps import AppConfig


class StorageConfig(AppConfig):
    name = "webapp.storage"
    label = "storage"
