"""The import contracts of ``pyproject.toml`` ([tool.importlinter]) hold for this checkout.

``lint-imports`` (import-linter, on grimp's graph, which counts imports inside functions too) checks:
raftnode imports neither Django nor webapp; connectors never import the web layer; the product imports
nothing of ``tools`` (demo, launcher, netns, benchmark views); the SMTs (``webapp.runtime.transforms``)
import only the plugin API and the converters, and no Django, Spark or Kafka client themselves; the
plugin API (``webapp.plugin``) imports nothing of webapp or raftnode and no framework; connectors >
runtime > plugin API (the runtime reaches connectors only through entry points); connectors use the
plugin API and the runtime's declared helpers only; the file connector package imports no JDBC module,
store, coordinator or Raft, and inside it the tasks > connectors > config; the JDBC connector
package imports no file connector module, store, coordinator or Raft, inside it the tasks > sink
records > connectors > dialects, jobs > config > dbio, and its database I/O (``dbio``, shipped to
Spark's workers by value) imports nothing of the project, Django, Spark or Kafka clients; only the entry points Django
and DRF construct import the node locator (``webapp.connect.locator``); the layers web > connect >
runtime > coordinator > storage > raftnode; no import circle among the packages and modules of
``webapp`` at any depth (e.g. ``connect.api.lifecycle`` and ``views``). Part of ``make test``.
"""
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    # this checkout's packages, whatever an editable install points at; no cache directory left behind
    out = subprocess.run([sys.executable, "-c", "from importlinter.cli import lint_imports_command as c; c()",
                          "--no-cache", "--no-logo"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert "Contracts: 16 kept, 0 broken." in out.stdout, out.stdout + out.stderr
    assert out.returncode == 0
