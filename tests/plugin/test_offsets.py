"""``partition_key`` and the relational stores' ``json_text``: fast encoders that must give exactly
the text of the ``json.dumps`` forms stored before them (an offset row's key is that text)."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from webapp.plugin import partition_key
from webapp.storage.relational.offsets import json_text

# the characters where the two encoders' escapes differ or nearly do
_ascii = st.text(st.sampled_from("az_/.-09 \x00\x1f\x7f\x80\"\\<>&\u00e9\u2028\U0001f600"))
_scalars = (st.text() | _ascii | st.integers() | st.integers(min_value=2 ** 63 - 3, max_value=2 ** 64 + 3)
            | st.floats(allow_nan=False) | st.booleans() | st.none())
_maps = st.dictionaries(st.text() | _ascii, _scalars, max_size=6)


def _reference(partition: dict) -> str:
    return json.dumps(dict(partition), sort_keys=True, separators=(",", ":"))


@settings(max_examples=2000, deadline=None)
@given(_maps)
def test_partition_key_is_the_json_dumps_form_for_any_map(partition):
    assert partition_key(partition) == _reference(partition)


def test_partition_key_on_the_maps_connectors_write_and_their_edges():
    for partition in ({"topic": "orders", "partition": 3}, {"file": "/data/in/a.csv"}, {"table": "public.t"},
                      {"b": 1, "a": 2, "A": 3, "_": 4}, {"n": -(2 ** 63)}, {"n": 2 ** 63 - 1}, {"n": 2 ** 63},
                      {"n": 2 ** 64}, {"s": "caf\u00e9"}, {"s": "tab\there"}, {"s": 'quote"d'}, {"s": "back\\slash"},
                      {"s": "\u2028"}, {"s": "\x7f"}, {"s": "</script>"}, {"f": 1e16}, {"f": 1e-05}, {"b": True},
                      {"z": None}, {"\u00e9": 1}, {}):
        assert partition_key(partition) == _reference(partition), partition


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.fixed_dictionaries({"c": st.text(), "p": _maps, "o": _maps})))
def test_json_text_reads_back_as_the_value_and_is_ascii(rows):
    text = json_text(rows)
    assert text.isascii()
    assert json.loads(text) == json.loads(json.dumps(rows))
