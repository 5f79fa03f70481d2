"""A node's garbage collection figures in its Raft status (``webapp.gcpolicy``)."""


def test_a_nodes_raft_status_shows_its_collector_as_published(live_node):
    """``runnode`` times the collections and freezes; ``GET /raftconnect/v1/raft`` says so, as its schema publishes."""
    import jsonschema
    import requests

    body = requests.get(f"{live_node.url}/raftconnect/v1/raft", auth=live_node.auth, timeout=30).json()
    figures = body["gc"]
    assert len(figures["collections"]) == 3 and all(isinstance(n, int) for n in figures["collections"])
    assert sum(figures["collections"]) > 0  # a node that migrated its database and started Raft has collected
    assert figures["freeze"] is not None and figures["freeze"]["thaws"] <= figures["freeze"]["freezes"]
    schema = requests.get(f"{live_node.url}/raftconnect/v1/openapi.json", timeout=30).json()
    content = schema["paths"]["/raftconnect/v1/raft"]["get"]["responses"]["200"]["content"]["application/json"]
    jsonschema.validate(body, {**content["schema"], "components": schema["components"]},
                        cls=jsonschema.Draft202012Validator)
