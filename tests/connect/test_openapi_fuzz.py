"""Schema fuzzing (schemathesis) of a live node: no 5xx, and every response conforms to the published schema.

Runs as an operator (created with ``POST /raftconnect/v1/users`` on the node's
data dir), so the generated requests exercise connector writes while Raft
membership and metadata-store switches (admin) are refused with 403 instead of
reshaping the one-node cluster under test. Bounded by
``RAFTCONNECT_FUZZ_EXAMPLES`` examples per operation (default 5, well under a
minute); ``make fuzz`` runs a bigger campaign.
"""
from __future__ import annotations

import os
from collections import Counter

import pytest
import schemathesis
# Imported here, at collection, not lazily by the first schema load inside a test: pytest rewrites
# schemathesis' modules as they import (parsing each with ``ast``), and CPython 3.11.7 keeps the AST
# conversion's recursion depth in state all the process's threads share, which threaded programs can
# leave off (python/cpython gh-106905): a parse late in a session full of threads failed with "AST
# constructor recursion depth mismatch" (seen in CI). At collection no test has started a thread yet.
import schemathesis.specs.openapi.schemas  # noqa: F401
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (content_type_conformance, response_schema_conformance,
                                               status_code_conformance)


from .conftest import basic

pytestmark = pytest.mark.integration

EXAMPLES = int(os.environ.get("RAFTCONNECT_FUZZ_EXAMPLES", "5"))
#: the bounded run in `make test` is reproducible; a campaign (`make fuzz`) explores new inputs each time
DERANDOMIZE = "RAFTCONNECT_FUZZ_EXAMPLES" not in os.environ
CHECKS = [not_a_server_error, response_schema_conformance, status_code_conformance, content_type_conformance]


@pytest.fixture(scope="session")
def fuzz_auth(live_node) -> dict[str, str]:
    live_node.create_user("fuzzer", "operator", password="fuzz-pw")
    return {"Authorization": basic("fuzzer", "fuzz-pw")}


@pytest.fixture(scope="session")
def api_schema(live_node, fuzz_auth):
    return schemathesis.openapi.from_url(f"{live_node.url}/raftconnect/v1/openapi.json", headers=fuzz_auth)


def test_api_answers_within_its_schema(api_schema, fuzz_auth):
    """Every operation, ``EXAMPLES`` generated cases each (schemathesis' pytest plugin does not load under pytest 9)."""
    failures: list[str] = []
    statuses: Counter[int] = Counter()
    operations = [result.ok() for result in api_schema.get_all_operations()]
    assert len(operations) >= 20  # the schema really lists the API

    for operation in operations:
        @given(case=operation.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=DERANDOMIZE,
                  database=None)
        def run(case):
            statuses[case.call_and_validate(headers=fuzz_auth, checks=CHECKS, timeout=30).status_code] += 1

        try:
            run()
        except Exception as exc:  # noqa: BLE001 - collected, reported together below
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)
    # the generated requests reached the views: successes and Connect's refusals both occurred
    assert sum(n for code, n in statuses.items() if code < 300) > 0 and statuses[400] + statuses[404] > 0, statuses
