"""RaftConnect's version, read once from the installed distribution's metadata (``pyproject.toml``).

The one source of the version: ``GET /`` (``version``), ``GET /connector-plugins`` (the
runtime's and the built-in plugins' versions), the SMTs' versions and the OpenAPI schema all
read :data:`RAFTCONNECT_VERSION`. Running from a checkout that was never installed
(``pip install -e .`` is what ``make setup`` does) gives ``0+unknown``.
"""
from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["RAFTCONNECT_VERSION"]


def _installed_version() -> str:
    try:
        return version("raftconnect")
    except PackageNotFoundError:
        return "0+unknown"


#: the distribution's version string (PEP 440)
RAFTCONNECT_VERSION: str = _installed_version()
