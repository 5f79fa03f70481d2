"""Two source trees measured in one run: the baseline revision extracted, and a child process per tree.

Used by the in-process scale benchmarks (``benchmarks/scale/expand.py``, ``views.py``): each
measures BASELINE and this checkout alternately, each tree in its own child process that
imports only that tree's code, and compares the two in the same run. Not part of the product.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["extract", "enter", "run_child", "alternate", "uncommitted", "add_arguments"]

ROOT = Path(__file__).resolve().parents[1]


def _git(*args: str) -> bytes:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True).stdout


def extract(rev: str, prefix: str) -> tuple[Path, str, str]:
    """``(tree, rev, head)``: ``rev`` of this repository written to a new temporary directory (``git
    archive``), and the short hashes of ``rev`` and of ``HEAD``. Errors: ``CalledProcessError``
    for an unknown revision."""
    tree = Path(tempfile.mkdtemp(prefix=prefix)) / "baseline"
    tree.mkdir()
    short = _git("rev-parse", "--short", rev).decode().strip()
    head = _git("rev-parse", "--short", "HEAD").decode().strip()
    subprocess.run(["tar", "-x", "-C", str(tree)], input=_git("archive", short), check=True)
    return tree, short, head


def uncommitted(results: str) -> bool:
    """Whether this checkout has uncommitted changes to tracked files, apart from ``results`` (the
    RESULTS.md path, relative to the repository root, that the benchmark itself appends to): a row
    that names ``HEAD`` then says "plus uncommitted changes"."""
    return bool(_git("status", "--porcelain", "--untracked-files=no", "--", ".", f":!{results}").strip())


def enter(tree: str) -> None:
    """In a child: import ``tree``'s code from now on and set Django up for it (development mode).

    Errors: ``AssertionError`` if ``webapp`` or ``raftnode`` still come from elsewhere."""
    sys.path.insert(0, tree)
    os.environ["DJANGO_SETTINGS_MODULE"] = "webapp.settings"
    os.environ["RAFTCONNECT_DEVELOPMENT"] = "1"
    import django

    django.setup()
    import raftnode
    import webapp

    for package in (webapp, raftnode):
        assert Path(package.__file__).resolve().is_relative_to(Path(tree).resolve()), package.__file__


def run_child(script: str, tree: str, args: list[str]) -> dict[str, Any]:
    """Run ``script --child --tree TREE *args`` and return the JSON object on its last line of output.

    The working directory is the tree (Celery's Django fixup puts it first on ``sys.path``).
    Errors: ``RuntimeError`` with the child's stderr tail when it fails."""
    proc = subprocess.run([sys.executable, script, "--child", "--tree", tree, *args], capture_output=True, text=True,
                          timeout=3600, cwd=tree)
    if proc.returncode:
        raise RuntimeError(f"child for {tree} failed:\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def alternate(script: str, baseline_tree: str, args: list[str], passes: int) -> dict[str, list[dict[str, Any]]]:
    """``{"before": [...], "after": [...]}``: :func:`run_child` of ``script`` on ``baseline_tree`` and on this
    checkout, alternately (before first), ``passes`` times each, so that load drift on a shared machine
    hits both alike; prints each child's time to stderr."""
    import time

    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    for p in range(passes):
        for label, tree in (("before", baseline_tree), ("after", str(ROOT))):
            t0 = time.monotonic()
            results[label].append(run_child(script, tree, args))
            print(f"pass {p + 1}: {label} done in {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    return results


def add_arguments(parser, baseline: str) -> None:
    """The options every two-tree benchmark takes: the cluster's size (``--connectors``, ``--tasks``,
    ``--workers``), ``--passes``, ``--baseline`` (default ``baseline``), ``--no-record``, and the hidden
    ``--child`` / ``--tree`` its children are run with."""
    import argparse

    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--passes", type=int, default=2, help="children per tree, alternating")
    parser.add_argument("--baseline", default=baseline, help="git revision measured as 'before'")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
