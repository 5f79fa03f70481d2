from django.apps import AppConfig


class RuntimeConfig(AppConfig):
    name = "webapp.runtime"
    label = "runtime"
