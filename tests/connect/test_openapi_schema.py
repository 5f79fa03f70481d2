"""The published OpenAPI schema types every RaftConnect response, sums up each operation in plain text
and describes no secret.

Walks the schema drf-spectacular generates for ``/raftconnect/v1/openapi.json`` (the same
generator and hooks as the view, without a node): a 2xx JSON response (of a
``/raftconnect/v1/`` path, or of Kafka Connect's) whose schema is an object with no
``properties`` (free-form, or ``additionalProperties`` only) fails, so a new endpoint cannot
publish an untyped body. A map
whose values are typed (``additionalProperties`` with a typed schema) is typed. Deeper down,
a free-form object is accepted only with a description of what it holds (Connect's source
partitions and offsets belong to the connector).
"""
from __future__ import annotations

import json
import re
from typing import Any

import pytest

RAFTCONNECT = "/raftconnect/v1/"
_COMPOSED = ("oneOf", "anyOf", "allOf")


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    return json.loads(OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True)))


def untyped(node: Any, components: dict[str, Any], where: str = "$", depth: int = 0) -> list[str]:
    """Where ``node`` (a JSON schema) holds an object without properties: ``["$.nodes[].raft", ...]``.

    Follows ``$ref``, array items, ``oneOf``/``anyOf``/``allOf`` branches, properties and typed
    map values. At ``depth`` 0 (the response body itself, its items or branches) any free-form
    object counts; deeper, only one without a ``description``.
    """
    seen = set()
    while isinstance(node, dict) and "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name in seen:
            return []
        seen.add(name)
        node = components[name]
    if not isinstance(node, dict):
        return []
    found: list[str] = []
    for key in _COMPOSED:
        for i, branch in enumerate(node.get(key, [])):
            found += untyped(branch, components, f"{where}.{key}[{i}]", depth)
    types = node.get("type")
    types = types if isinstance(types, list) else [types]
    if "array" in types:
        if not node.get("items"):
            found.append(f"{where} (array of anything)")
        else:
            found += untyped(node["items"], components, f"{where}[]", depth)
    bare = node.get("type") is None and not any(k in node for k in (*_COMPOSED, "enum", "const", "$ref"))
    if "object" in types or bare:
        props, extra = node.get("properties"), node.get("additionalProperties")
        if props:
            for name, sub in props.items():
                found += untyped(sub, components, f"{where}.{name}", depth + 1)
        elif isinstance(extra, dict) and extra and (extra.get("type") or "$ref" in extra or
                                                   any(k in extra for k in _COMPOSED)):
            found += untyped(extra, components, f"{where}.*", depth + 1)
        elif depth == 0 or not node.get("description"):
            found.append(where)
    return found


def _json_2xx(schema: dict[str, Any]):
    for path, item in schema["paths"].items():
        for method, op in item.items():
            for code, response in op.get("responses", {}).items():
                if code.startswith("2"):
                    for content_type, content in (response.get("content") or {}).items():
                        if "json" in content_type and "schema" in content:
                            yield path, method, code, content["schema"]


def test_the_walker_finds_free_form_objects():
    components = {"Typed": {"type": "object", "properties": {"a": {"type": "string"}}},
                  "Loose": {"type": "object", "additionalProperties": True}}
    assert untyped({"$ref": "#/components/schemas/Loose"}, components) == ["$"]
    assert untyped({"type": "object", "additionalProperties": {}}, components) == ["$"]
    assert untyped({"type": "array", "items": {"type": "object"}}, components) == ["$[]"]
    assert untyped({"oneOf": [{"$ref": "#/components/schemas/Typed"}, {"type": "object"}]}, components) \
        == ["$.oneOf[1]"]
    assert untyped({"type": "object", "properties": {"x": {"type": "object"}}}, components) == ["$.x"]
    assert untyped({"type": "object", "properties": {"x": {"type": "object", "description": "any"}}},
                   components) == []
    assert untyped({"type": "object", "additionalProperties": {"$ref": "#/components/schemas/Typed"}},
                   components) == []
    assert untyped({"type": "object", "additionalProperties": {"type": "string"}}, components) == []


def test_every_raftconnect_response_is_typed(schema):
    """RaftConnect's own paths above all, and Kafka Connect's too (their entities are in ``openapi.SCHEMAS``)."""
    components = schema["components"]["schemas"]
    loose = [f"{method.upper()} {path} {code}: {', '.join(where)}"
             for path, method, code, body in _json_2xx(schema)
             for where in [untyped(body, components)] if where]
    assert not loose, ("responses published as untyped objects (declare a serializer, e.g. in "
                       "webapp/connect/api/serializers.py):\n" + "\n".join(loose))
    typed = {path for path, *_ in _json_2xx(schema) if path.startswith(RAFTCONNECT)}
    assert {"/raftconnect/v1/cluster", "/raftconnect/v1/raft", "/raftconnect/v1/raft/members",
            "/raftconnect/v1/metadata-store", "/raftconnect/v1/metadata-store/switch", "/raftconnect/v1/backup",
            "/raftconnect/v1/metadata-store/stores", "/raftconnect/v1/metadata-store/stores/{name}/test",
            "/raftconnect/v1/restore", "/raftconnect/v1/users", "/raftconnect/v1/tokens",
            "/raftconnect/v1/console/history", "/raftconnect/v1/console/connectors/{name}/offsets"} <= typed


def test_every_operation_has_a_plain_text_summary(schema):
    bad = []
    for path, item in schema["paths"].items():
        for method, op in item.items():
            summary = op.get("summary") or ""
            if not summary or len(summary) > 90 or re.search(r"[`*_<>\[\]|\n{}]", summary) or summary.endswith("."):
                bad.append(f"{method.upper()} {path}: {summary!r}")
    assert not bad, "add a one-line plain summary to webapp.connect.api.openapi.SUMMARIES:\n" + "\n".join(bad)


def test_no_response_describes_a_secret(schema):
    """Only the answers whose point is a credential carry one: a new token's key (shown once), the
    backup's password hashes, and an added metadata store's password as the config-provider
    reference it must be (a clear password is refused); request bodies are where passwords go."""
    allowed = {"NewToken.token", "BackupUser.password", "MetadataStore.password"}
    components = schema["components"]["schemas"]
    refs: set[str] = set()

    def collect(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if ref and ref.rsplit("/", 1)[-1] not in refs:
                refs.add(ref.rsplit("/", 1)[-1])
                collect(components[ref.rsplit("/", 1)[-1]])
            for value in node.values():
                collect(value)
        elif isinstance(node, list):
            for value in node:
                collect(value)

    for *_, body in _json_2xx(schema):
        collect(body)
    found = {f"{name}.{prop}" for name in refs for prop in (components[name].get("properties") or {})
             if re.search(r"password|secret|token$|^key$", prop)}
    assert found <= allowed, found - allowed
    assert not re.search(r'"examples?":', json.dumps(schema))  # no sample values (of credentials or else)
