"""The ``raftconnect`` console script: ``raftconnect node`` runs a node, the other commands are a
kcctl-like client of the REST API (contexts, get, describe, apply, pause/resume/stop/restart,
delete, offsets, cluster).

Owns the command line only: the client commands talk to nodes through the public REST API
(:mod:`webapp.cli.client`) and never import Django; ``node`` delegates to ``runnode``.
Depends on click and requests; nothing here is test tooling.
"""
from .app import cli, main

__all__ = ["cli", "main"]
