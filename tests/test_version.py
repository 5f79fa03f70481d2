"""One version source: pyproject.toml, read through the installed distribution's metadata."""
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _declared() -> str:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_every_reported_version_is_the_distributions():
    from django.conf import settings

    from webapp.connect.api.views import VERSION
    from webapp.connect.plugins import RUNTIME_VERSION
    from webapp.connectors.file import FileSourceConnector
    from webapp.plugin import RAFTCONNECT_VERSION
    from webapp.runtime.transforms.base import VERSION as SMT_VERSION

    assert RAFTCONNECT_VERSION == _declared()
    assert VERSION == f"3.9.0-raftconnect-{_declared()}"
    assert RUNTIME_VERSION == SMT_VERSION == FileSourceConnector.version == settings.SPECTACULAR_SETTINGS["VERSION"] \
        == _declared()


def test_no_python_module_writes_the_version_itself():
    literal = re.compile(r"""["'](?:[^"']*-)?""" + re.escape(_declared()) + r"""["']""")
    written = [str(p.relative_to(ROOT)) for top in ("webapp", "raftnode")
               for p in (ROOT / top).rglob("*.py") if literal.search(p.read_text())]
    assert written == [], f"version literals outside pyproject.toml: {written}"
