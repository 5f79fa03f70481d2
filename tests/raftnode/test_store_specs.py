"""Run-time metadata stores in the replicated state: add, remove, what removal refuses, snapshots."""
from __future__ import annotations

from raftnode.state import ClusterStateMachine

from .test_users import apply

SPEC = {"url": "postgresql://rc@db:5432/meta", "password": "${env:PG_PASSWORD}", "added_by": "root"}


def test_add_and_remove_a_store():
    sm = ClusterStateMachine()
    assert apply(sm, "_zz_store_spec", "pg", SPEC, 5.0) == {"ok": True, "created": True}
    assert sm.store_spec("pg") == {"url": SPEC["url"], "password": SPEC["password"], "added_at": 5.0,
                                   "added_by": "root"}
    assert apply(sm, "_zz_store_spec", "pg", SPEC, 6.0)["code"] == 409
    assert apply(sm, "_zz_store_spec", "raft", SPEC, 6.0)["code"] == 400
    assert sm.store_spec_names() == ["pg"]
    assert apply(sm, "_zz_store_spec", "pg", None, 7.0) == {"ok": True}
    assert apply(sm, "_zz_store_spec", "pg", None, 7.0)["code"] == 404
    assert sm.store_spec_names() == []


def test_removal_is_refused_for_the_active_store_and_a_running_switchs_stores():
    sm = ClusterStateMachine()
    apply(sm, "_zz_store_spec", "pg", SPEC, 1.0)
    apply(sm, "_begin_switch", 0, "s1", "raft", "pg", 2.0)
    refused = apply(sm, "_zz_store_spec", "pg", None, 3.0)
    assert refused["code"] == 409 and "running switch" in refused["rejected"]
    apply(sm, "_switch_phase", 0, "s1", "verify", {}, 3.0)
    apply(sm, "_commit_switch", 0, "s1", {}, 4.0)
    refused = apply(sm, "_zz_store_spec", "pg", None, 5.0)
    assert refused["code"] == 409 and "active store" in refused["rejected"]
    assert sm.store_spec_names() == ["pg"]


def test_store_specs_travel_in_snapshots_and_old_snapshots_have_none():
    sm = ClusterStateMachine()
    apply(sm, "_zz_store_spec", "pg", SPEC, 1.0)
    data = sm._serialize()
    fresh = ClusterStateMachine()
    fresh._deserialize(data)
    assert fresh.store_spec("pg")["url"] == SPEC["url"]
    fresh._deserialize({k: v for k, v in data.items() if k != "store_specs"})
    assert fresh.store_specs == {}
