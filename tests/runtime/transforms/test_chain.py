"""The chain (:mod:`webapp.runtime.transforms.chain`): order, predicates on a subset, tolerance, registry,
validation, pickling; one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

import pytest

from webapp.runtime.transforms.chain import (
    TransformationChain,
    resolve_predicate,
    resolve_transformation,
    transform_plugins,
    validate_transforms,
)
from webapp.plugin import ConfigException

from .support import ALICE, P, batch, one, rec, run, values


def test_predicate_subset_gives_union_schema():
    cfg = {**one("InsertField$Value", static_field="tag", static_value="x"), "transforms.t.predicate": "p",
           "predicates": "p", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "a"}
    out = run(cfg, rec(ALICE, topic="a"), rec(ALICE, topic="b"))
    assert values(out) == [{**ALICE, "tag": "x"}, {**ALICE, "tag": None}]
    assert out.value_schema["fields"][-1] == {"field": "tag", "type": "string", "optional": True}


def test_chain_applies_in_order():
    cfg = {"transforms": "hoist,ins", "transforms.hoist.type": "HoistField$Value", "transforms.hoist.field": "line",
           "transforms.ins.type": "InsertField$Value", "transforms.ins.topic.field": "topic"}
    out = run(cfg, rec("l1", schema={"type": "string", "optional": False}))
    assert values(out) == [{"line": "l1", "topic": "people"}]


def test_apply_tolerant_isolates_bad_records():
    chain = TransformationChain.from_config(one("Cast$Value", spec="name:int32"))
    good, errors = chain.apply_tolerant(batch(rec({**ALICE, "name": "1"}), rec(ALICE), rec({**ALICE, "name": "3"})))
    assert [v["name"] for v in values(good)] == [1, 3]
    assert [i for i, _ in errors] == [1]
    assert errors[0][1].executing_class == P + "Cast$Value"


def test_output_empty_predicts_output_schema():
    chain = TransformationChain.from_config(one("HoistField$Value", field="v"))
    out = chain.output_empty(batch(rec(ALICE)))
    assert out.num_rows == 0 and out.value_schema["fields"][0]["field"] == "v"


def test_validation_reports_unknown_types_missing_keys_and_predicates():
    errors = validate_transforms({"transforms": "a,b,c", "transforms.a.type": "com.example.Nope",
                                  "transforms.b.type": "ExtractField$Value",
                                  "transforms.c.type": "Filter", "transforms.c.predicate": "missing"})
    assert "Class com.example.Nope could not be found" in errors["transforms.a.type"][0]
    assert errors["transforms.b.field"] == ['Missing required configuration "transforms.b.field" which has no '
                                            'default value.']
    assert "There is no predicate 'missing'" in errors["transforms.c.predicate"][0]
    assert validate_transforms({"transforms": "x"})["transforms.x.type"]
    assert validate_transforms({}) == {}
    with pytest.raises(ConfigException):
        TransformationChain.from_config({"transforms": "x"})


def test_registry_names_and_plugin_listing():
    assert resolve_transformation("InsertField$Value").type_name == P + "InsertField$Value"
    assert resolve_transformation(P + "Cast$Key").side == "key"
    assert resolve_predicate("RecordIsTombstone").type_name == P + "predicates.RecordIsTombstone"
    plugins = transform_plugins()
    names = {p["class"]: p["type"] for p in plugins}
    for base in ("InsertField", "ReplaceField", "MaskField", "ExtractField", "HoistField", "Cast",
                 "TimestampConverter"):
        assert names[P + base + "$Key"] == names[P + base + "$Value"] == "transformation"
    for t in ("ValueToKey", "RegexRouter", "TimestampRouter", "Filter", "InsertHeader", "DropHeaders"):
        assert names[P + t] == "transformation"
    for p in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"):
        assert names[P + "predicates." + p] == "predicate"
    assert [p["class"] for p in plugins] == sorted(names)


def test_chain_is_picklable_for_spark_workers():
    import pickle

    chain = TransformationChain.from_config(one("RegexRouter", regex="a", replacement="b"))
    again = pickle.loads(pickle.dumps(chain))
    assert again.apply(batch(rec(ALICE, topic="a"))).to_records()[0].topic == "b"


def test_key_value_variants_pickle_by_reference_from_their_family_module():
    import pickle

    from webapp.runtime.transforms import cast, field

    assert field.InsertFieldValue.__module__ == field.__name__ and cast.CastKey.__module__ == cast.__name__
    chain = TransformationChain.from_config(one("Cast$Value", spec="age:string"))
    again = pickle.loads(pickle.dumps(chain))
    assert type(again.steps[0].transform) is cast.CastValue
    assert values(again.apply(batch(rec(ALICE))))[0]["age"] == "30"
