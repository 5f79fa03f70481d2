"""The in-process node and API client fixtures of ``tests/connect`` (real Raft, no agent)."""
from tests.connect.conftest import api, node  # noqa: F401 - re-exported fixtures
