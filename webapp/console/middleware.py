"""Serving the console's built files at ``/console/`` with WhiteNoise.

``npm run build`` in ``frontend/`` (``make frontend``) writes the console into
this package, ``webapp/console/dist`` (gitignored; package data of the wheel, so
an installed node serves the same files as a checkout);
:class:`ConsoleFilesMiddleware` serves that directory under ``/console/`` from
every node, before Django's URL routing: ``/console/`` is its ``index.html``
(revalidated after 60 s), and Vite's content-hashed ``/console/assets/*`` are
cached forever. It also serves the installed apps' static files at
``STATIC_URL`` (the Django admin's stylesheets, which nothing else serves when
``DEBUG`` is off). The files are read when the process starts; a node started
before the build answers ``/console/`` with :func:`webapp.console.views.not_built`.
The files hold no data: the API they call requires authentication.
"""
from __future__ import annotations

import re
from pathlib import Path

from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware

from .views import not_built

__all__ = ["ConsoleFilesMiddleware", "CONSOLE_DIST", "CONSOLE_PREFIX"]

#: where ``npm run build`` puts the console (frontend/vite.config.ts ``outDir``), inside this package
CONSOLE_DIST = Path(__file__).resolve().parent / "dist"
#: URL prefix of the console (Vite's ``base`` is ``/console/``)
CONSOLE_PREFIX = "console/"

_HASHED = re.compile(r"^/console/assets/.+-[0-9A-Za-z_-]{8,}\.\w+$")


def _immutable(path: str, url: str) -> bool:
    return bool(_HASHED.match(url))


class ConsoleFilesMiddleware(WhiteNoiseMiddleware):
    """WhiteNoise serving :data:`CONSOLE_DIST` at ``/console/`` (index files on, hashed assets immutable) and app static files."""

    def __init__(self, get_response=None, settings=settings):
        super().__init__(get_response, settings=settings)
        self.index_file = "index.html"
        self.immutable_file_test = _immutable
        if CONSOLE_DIST.is_dir():
            self.add_files(str(CONSOLE_DIST), prefix=CONSOLE_PREFIX)
        if not (self.use_finders or self.autorefresh):  # otherwise WhiteNoise already does (DEBUG)
            self.add_files_from_finders()
        self.built = "/" + CONSOLE_PREFIX in self.files or self.autorefresh

    def __call__(self, request):
        if not self.built and request.path_info in ("/console", "/" + CONSOLE_PREFIX):
            return not_built(request)
        return super().__call__(request)
