"""WSGI entry point: the application the node's REST server (``runnode``) runs.

Django's handler with the REST fast path in front (``webapp.connect.api.fastpath``).
"""
import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django.setup(set_prefix=False)  # as django.core.wsgi.get_wsgi_application

from webapp.connect.api.fastpath import ConnectWSGIHandler  # noqa: E402 - after the apps are loaded

application = ConnectWSGIHandler()
