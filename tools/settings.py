"""Django settings of the development tools: the product's settings, development mode, and the ``tools`` app.

``manage.py`` chooses this module for ``demo`` and ``cluster`` (their management commands live in
``tools/management``); the benchmarks' nodes load it to mount the baseline views
(``RAFTCONNECT_BENCH_BASELINE=1``: ``tools.bench_urls``). Development mode
(``RAFTCONNECT_DEVELOPMENT=1``, see ``webapp.settings``) is put in the environment so the nodes these
tools start as subprocesses inherit it.
"""
import os

os.environ.setdefault("RAFTCONNECT_DEVELOPMENT", "1")

from webapp.settings import *  # noqa: E402,F401,F403 - the product's settings, unchanged but for the lines below
from webapp.settings import INSTALLED_APPS as _PRODUCT_APPS  # noqa: E402

INSTALLED_APPS = [*_PRODUCT_APPS, "tools"]

if os.environ.get("RAFTCONNECT_BENCH_BASELINE") == "1":  # benchmarks/rest/run.py only
    ROOT_URLCONF = "tools.bench_urls"
