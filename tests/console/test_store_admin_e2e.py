"""The admin page's store switching end to end: headless chromium (Playwright) against a real node process.

A superuser adds a PostgreSQL store with its password as a ``${env:...}`` reference, tests
it, starts a switch, reads the confirmation, and watches the step indicator move through
prepare → copy → verify → commit without reloading the page, to a plain-language result.
The node holds each phase ``--switch-hold-seconds`` so every step is on screen for a poll.
Screenshots go to ``var/test-artifacts/console/``; ``RAFTCONNECT_UPDATE_DOC_IMAGES=1`` writes
the README's to ``docs/img/``.
"""
from __future__ import annotations

import os
import uuid

import pytest

from tests.storage.conftest import PG_URL, drop_database
from tools.launcher import NodeProcess
from webapp.kafka.embedded import free_port

from .test_e2e import CHROMIUM, CHROMIUM_ARGS, SOURCE, doc_shot, shot

pytestmark = pytest.mark.integration

SECRET = "e2e-Pg-Pass-31"


@pytest.fixture(scope="module")
def chromium():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: make setup installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def test_add_a_store_and_switch_to_it_from_the_admin_page(tmp_path, chromium):
    db = f"raftconnect_e2e_{uuid.uuid4().hex[:8]}"
    node = NodeProcess(node_id="s1", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "s1"),
                       bootstrap_servers="127.0.0.1:9", roles="raft", env={"RC_E2E_PG_PASSWORD": SECRET},
                       extra_args=["--switch-hold-seconds", "1.5"]).start(timeout=120)
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(60_000)
    try:
        data = tmp_path / "s1" / "files" / "in.csv"  # under the node's default allowed root
        data.write_text("id\n1\n")
        for i in range(3):  # something to copy (no worker: they stay unassigned)
            node.client().create_connector(f"e2e-{i}", {"connector.class": SOURCE, "path": str(data),
                                                        "format": "csv", "topic": "t"})
        page = context.new_page()
        page.goto(node.url + "/admin/login/?next=/admin/metadata-store/")
        page.fill("#id_username", node.auth[0])
        page.fill("#id_password", node.auth[1])
        page.click("input[type=submit]")
        page.wait_for_selector("#active-store:text-is('raft')")
        assert "No other store yet" in page.inner_text("#switch-form")

        page.fill("#store-name", "pg")
        page.fill("#store-url", PG_URL.format(db=db))
        page.fill("#store-password", "${env:RC_E2E_PG_PASSWORD}")
        page.click("#add-store input[type=submit]")
        page.wait_for_selector("tr[data-store=pg]")
        page.click("tr[data-store=pg] input[data-action=test]")
        page.wait_for_selector("#test-result[data-ok='1']")
        shot(page, "store-01-added-and-tested")

        page.select_option("#target", "pg")
        page.click("#switch-form input[type=submit]")
        page.wait_for_selector("#switch-plan")
        assert "read-only and keeps its data" in page.inner_text("#switch-plan")
        shot(page, "store-02-confirm")
        page.click("#confirm-switch")

        page.wait_for_selector("#switch[data-running='1']")
        page.evaluate("window.__notReloaded = true")  # gone if the page reloads
        page.wait_for_selector("#switch-steps [data-step=copy][data-state=current], "
                               "#switch-steps [data-step=verify][data-state=current]")
        assert page.locator("#switch-progress").count() == 1 and "elapsed" in page.inner_text("#switch")
        doc_shot(page, "store-switch-progress")
        page.wait_for_selector("#switch[data-outcome=completed]", timeout=120_000)
        assert page.evaluate("window.__notReloaded === true")
        assert page.inner_text("#active-store") == "pg"
        assert page.locator("#switch-steps [data-state=done]").count() == 4
        result = page.inner_text("#switch-result")
        assert "3 connectors" in result and "raft is now read-only" in result, result
        assert page.get_attribute("#rollback", "value") == "Switch back to raft"
        doc_shot(page, "store-switch-done")
        assert SECRET not in page.content()
    finally:
        context.close()
        node.stop()
        drop_database("postgresql", db)
