"""The build backend of the ``raftconnect`` distribution: setuptools' own, refusing a wheel without the console.

``pyproject.toml`` names this module (``build-backend``, ``backend-path = ["tools"]``). Every hook is
``setuptools.build_meta``'s; :func:`build_wheel` and :func:`build_sdist` first check that the browser
console has been built into the package (``webapp/console/dist/index.html``, written by ``make frontend``)
and stop the build with how to build it otherwise, so that no wheel or source distribution ships a node
whose ``/console/`` answers "not built". Editable installs (``pip install -e .``) are not checked: they
serve the checkout's ``webapp/console/dist`` whenever it is built. Outside the shipped packages; imports
nothing of them.
"""
from __future__ import annotations

from pathlib import Path

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 - every other hook unchanged

__all__ = [*_setuptools.__all__]

#: relative to the project root, the working directory of every build hook (PEP 517)
CONSOLE_INDEX = Path("webapp") / "console" / "dist" / "index.html"


class ConsoleNotBuilt(RuntimeError):
    """The console's build output is missing from the package."""


def _require_console() -> None:
    if not CONSOLE_INDEX.is_file():
        raise ConsoleNotBuilt(
            f"{CONSOLE_INDEX} is missing: the raftconnect wheel includes the built browser console. "
            "Run `make frontend` (npm ci and npm run build in frontend/, Node.js 20.19+) first, then build again.")


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _require_console()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_sdist(sdist_directory, config_settings=None):
    _require_console()
    return _setuptools.build_sdist(sdist_directory, config_settings)
