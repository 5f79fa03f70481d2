"""Django settings of the test suite: the product's settings in explicit development mode.

pytest-django loads this module (``DJANGO_SETTINGS_MODULE`` in ``pyproject.toml``) before any
test or conftest, so ``python -m pytest`` works without the caller setting anything. Development
mode goes into the environment, not just into this process, so the nodes and agents the tests
start as subprocesses are development nodes too; they load the product's ``webapp.settings``
(the variable is pointed back at it), never a module of the test tree.
"""
import os

os.environ.setdefault("RAFTCONNECT_DEVELOPMENT", "1")
os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"  # for subprocesses; this process has chosen already

from webapp.settings import *  # noqa: F403 - the settings under test are the product's
