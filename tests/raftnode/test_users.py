"""Replicated users and API tokens: the state machine's commands, their log numbering, snapshots, restarts."""
from __future__ import annotations

import pytest

from raftnode import CommandRejected, RaftConfig, RaftNode
from raftnode.state import LEGACY_COMMANDS, ClusterStateMachine
from webapp.kafka.embedded import free_port

from .members import apply




def machine_with_admin() -> ClusterStateMachine:
    sm = ClusterStateMachine()
    assert apply(sm, "_user_put", "root", {"password": "hash-r", "role": "admin"}, True, 10.0) == \
        {"ok": True, "created": True}
    return sm


def test_create_update_and_delete_a_user():
    sm = machine_with_admin()
    apply(sm, "_user_put", "ann", {"password": "hash-a", "role": "viewer"}, True, 11.0)
    assert sm.user("ann") == {"password": "hash-a", "role": "viewer", "active": True, "created": 11.0,
                              "updated": 11.0}
    again = apply(sm, "_user_put", "ann", {"password": "other", "role": "admin"}, True, 12.0)
    assert again == {"rejected": "User ann already exists", "code": 409}
    assert sm.user("ann")["password"] == "hash-a"
    apply(sm, "_user_put", "ann", {"role": "operator", "active": False, "unknown": 1}, False, 13.0)
    assert sm.user("ann") == {"password": "hash-a", "role": "operator", "active": False, "created": 11.0,
                              "updated": 13.0}
    assert apply(sm, "_user_put", "bob", {"role": "viewer"}, False, 14.0)["code"] == 404
    assert apply(sm, "_user_put", "bob", {"role": "viewer"}, True, 14.0)["code"] == 400  # no hash
    assert sm.user_names() == ["ann", "root"]
    apply(sm, "_token_create", "ann", "ci", "d1", 15.0, None)
    assert apply(sm, "_user_delete", "ann") == {"ok": True}
    assert sm.user("ann") is None and sm.token("d1") is None
    assert apply(sm, "_user_delete", "ann")["code"] == 404


def test_the_last_active_admin_cannot_be_removed_demoted_or_deactivated():
    sm = machine_with_admin()
    for changes in ({"role": "operator"}, {"active": False}):
        assert apply(sm, "_user_put", "root", changes, False, 11.0)["code"] == 409
    assert apply(sm, "_user_delete", "root")["code"] == 409
    assert sm.user("root")["role"] == "admin" and sm.user("root")["active"] is True
    apply(sm, "_user_put", "second", {"password": "h", "role": "admin"}, True, 12.0)
    assert apply(sm, "_user_put", "root", {"active": False}, False, 13.0) == {"ok": True, "created": False}
    assert apply(sm, "_user_delete", "second")["code"] == 409  # root is inactive now


def test_tokens_are_named_several_per_user_and_revocable():
    sm = machine_with_admin()
    assert apply(sm, "_token_create", "root", "ci", "d1", 20.0, None) == {"ok": True}
    assert apply(sm, "_token_create", "root", "laptop", "d2", 21.0, 100.0) == {"ok": True}
    dup = apply(sm, "_token_create", "root", "ci", "d3", 22.0, None)
    assert dup == {"rejected": "User root already has a token named ci", "code": 409}
    assert sm.token("d3") is None and sm.token("d1")["user"] == "root"  # never silently rotated
    assert apply(sm, "_token_create", "nobody", "ci", "d4", 22.0, None)["code"] == 404
    assert sm.user_tokens("root") == [{"name": "ci", "created": 20.0, "expires": None},
                                      {"name": "laptop", "created": 21.0, "expires": 100.0}]
    assert apply(sm, "_token_revoke", "root", "ci") == {"ok": True}
    assert sm.token("d1") is None
    assert apply(sm, "_token_revoke", "root", "ci")["code"] == 404


def test_an_expired_token_is_dropped_when_its_user_creates_one_so_its_name_is_free_again():
    sm = machine_with_admin()
    apply(sm, "_token_create", "root", "short", "d1", 20.0, 30.0)
    assert apply(sm, "_token_create", "root", "short", "d2", 29.0, None)["code"] == 409  # not yet expired
    assert apply(sm, "_token_create", "root", "short", "d2", 30.0, None) == {"ok": True}
    assert sm.token("d1") is None and sm.token("d2")["name"] == "short"


def test_users_and_tokens_are_in_the_snapshot_and_an_older_snapshot_loads_without_them():
    sm = machine_with_admin()
    apply(sm, "_token_create", "root", "ci", "d1", 20.0, None)
    data = sm._serialize()
    assert data["users"]["root"]["password"] == "hash-r" and "d1" in data["tokens"]
    fresh = machine_with_admin()
    apply(fresh, "_user_put", "stale", {"password": "h", "role": "viewer"}, True, 1.0)
    fresh._deserialize(data)
    assert fresh.user_names() == ["root"] and fresh.token("d1")["name"] == "ci"
    old = {k: v for k, v in data.items() if k not in ("users", "tokens")}
    fresh._deserialize(old)
    assert fresh.user_names() == [] and fresh.tokens == {}


def test_new_commands_leave_the_numbers_of_the_logged_commands_unchanged(tmp_path):
    """pysyncobj logs a command's number (its rank in name order), so old journals need these numbers kept."""
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "raft")))
    try:
        ids = {name[:-3]: i for (owner, name), i in node.syncobj._methodToID.items()
               if isinstance(owner, int) and name.endswith("_v0")}
        assert [ids[c] for c in LEGACY_COMMANDS] == list(range(len(LEGACY_COMMANDS)))
        assert set(ids) - set(LEGACY_COMMANDS) == {"_token_create", "_token_revoke", "_user_delete", "_user_put",
                                                   "_zz_store_spec", "_zzz_apply_batch", "_zzzz_put_statuses",
                                                   "_zzzzz_commit_offsets", "_zzzzzz_put_task_configs",
                                                   "_zzzzzz_regrant_tasks", "_zzzzzz_rejoin_member",
                                                   "_zzzzzzz_commit_offsets", "_zzzzzzz_start_task",
                                                   "_zzzzzzzz_start_tasks"}
        assert ids["_zz_store_spec"] == len(LEGACY_COMMANDS) + 4  # the run-time stores command keeps its number
        # and so do the batched ones, with the three that grant instances anew after them
        assert [ids[c] for c in ("_zzz_apply_batch", "_zzzz_put_statuses", "_zzzzz_commit_offsets",
                                 "_zzzzzz_put_task_configs", "_zzzzzz_regrant_tasks", "_zzzzzz_rejoin_member",
                                 "_zzzzzzz_commit_offsets", "_zzzzzzz_start_task", "_zzzzzzzz_start_tasks")] \
            == list(range(len(LEGACY_COMMANDS) + 5, len(LEGACY_COMMANDS) + 14))
    finally:
        node.destroy()


def test_users_and_tokens_survive_a_restart_from_the_journal(tmp_path):
    raft_dir, port = str(tmp_path / "raft"), free_port()
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{port}", data_dir=raft_dir))
    assert node.wait_ready(15)
    node.commands.user_put(name="root", changes={"password": "h", "role": "admin"}, create=True, now=1.0)
    node.commands.token_create(user="root", name="ci", digest="d1", now=2.0, expires=None)
    with pytest.raises(CommandRejected) as exc:
        node.commands.token_create(user="root", name="ci", digest="d2", now=3.0, expires=None)
    assert exc.value.code == 409
    node.destroy()
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{port}", data_dir=raft_dir))
    try:
        assert node.wait_ready(15)
        assert node.state.user("root")["role"] == "admin"
        assert node.state.token("d1") == {"user": "root", "name": "ci", "created": 2.0, "expires": None}
    finally:
        node.destroy()
