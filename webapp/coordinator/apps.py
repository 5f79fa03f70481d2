from django.apps import AppConfig


class CoordinatorConfig(AppConfig):
    name = "webapp.coordinator"
    label = "coordinator"
