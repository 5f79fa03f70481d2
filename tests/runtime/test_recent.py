"""RecentKeys (webapp.runtime.recent): keys kept for their time to live, at most a limit of them."""
from __future__ import annotations

from webapp.runtime.recent import RecentKeys


def test_a_key_counts_for_its_time_to_live_from_its_last_add():
    now = [0.0]
    keys = RecentKeys(10.0, max_entries=8, clock=lambda: now[0])
    keys.add("a")
    now[0] = 9.9
    assert "a" in keys and "b" not in keys
    keys.add("a")  # added again: ten seconds from now
    now[0] = 19.8
    assert "a" in keys
    now[0] = 19.9
    assert "a" not in keys


def test_recent_keys_keep_at_most_their_limit_oldest_forgotten_first():
    keys = RecentKeys(60.0, max_entries=3, clock=lambda: 0.0)
    for key in "abcd":
        keys.add(key)
    assert [k in keys for k in "abcd"] == [False, True, True, True]
    keys.add("b")  # added again: now the newest
    keys.add("e")
    assert [k in keys for k in "bcde"] == [True, False, True, True]
