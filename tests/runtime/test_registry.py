"""``webapp.runtime.registry``: which installed connector plugin a ``connector.class`` names."""
from __future__ import annotations

import pytest


def test_connector_classes_resolve_by_full_name_simple_name_and_alias_as_before():
    from webapp.runtime import registry

    for p in registry.plugins():
        simple = p.class_name.rsplit(".", 1)[-1]
        names = [p.class_name, simple] + ([simple[: -len("Connector")]] if simple.endswith("Connector") else [])
        for name in names:
            # the first plugin in class-name order that answers to the name, as the scan used to find it
            first = next(q for q in registry.plugins() if name in (q.class_name, q.class_name.rsplit(".", 1)[-1],
                                                                  q.class_name.rsplit(".", 1)[-1].removesuffix("Connector")))
            assert registry.resolve(f"  {name} ") is first
    with pytest.raises(registry.UnknownPlugin, match="available connectors are"):
        registry.resolve("NoSuchConnector")
