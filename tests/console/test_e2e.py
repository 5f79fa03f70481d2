"""The console end to end: headless Debian chromium (Playwright, no browser download) against a real node.

One node (``raft,worker``) with the embedded Kafka, its console at ``/console/``
built by ``make frontend``. A user logs in, creates a connector from the plugin
form (first seeing a per-field error), watches it reach RUNNING with its
throughput and active topic, pauses and stops it and writes its offsets back,
opens a failed task's trace and restarts the task, filters the list, and a
viewer sees no write action. A second test follows a failing connector through
the list, detail and overview, stops Kafka and then kills the node (the README's
screenshots: ``RAFTCONNECT_UPDATE_DOC_IMAGES=1`` writes them to ``docs/img/``); a third
kills the browser's node in a three-member cluster and follows the console to another
member. Screenshots go to ``var/test-artifacts/console/``.
"""
from __future__ import annotations

import os
import re

import pytest
import requests

from tools.launcher import REPO_ROOT, NodeProcess, wait_for
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = REPO_ROOT / "var" / "test-artifacts" / "console"
SOURCE = "raftconnect.connectors.file.FileSourceConnector"
SLOW = 180_000  # ms: the first task starts Spark's JVM, on a loaded 2-core machine


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: make setup installs Debian's chromium")
    if not (REPO_ROOT / "webapp" / "console" / "dist" / "index.html").exists():
        pytest.fail("the console is not built: run make frontend")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def add_user(node: NodeProcess, username: str, password: str, group: str) -> None:
    """Create a replicated user with the role ``group`` (as an admin would over REST)."""
    node.create_user(username, group, password=password)


def shot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def log_in(page, url: str, username: str, password: str) -> None:
    page.goto(url + "/console/")
    page.fill("#username", username)
    page.fill("#password", password)
    page.click("button[type=submit]")
    page.wait_for_selector(f"[data-testid=user]:has-text('{username}')")


def test_console_login_create_pause_trace_and_viewer(tmp_path, kafka_broker, browser):
    data = tmp_path / "in.csv"
    data.write_text("id,name\n" + "".join(f"{i},name-{i}\n" for i in range(20_000)))
    bad = tmp_path / "bad.csv"
    # a well-formed start (the schema is inferred from it), then a row with the wrong number of columns
    bad.write_text("a,b\n" + "".join(f"{i},x{i}\n" for i in range(2000)) + "1,2,3,4\n")
    node = NodeProcess(node_id="c1", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "c1"),
                       bootstrap_servers=kafka_broker.bootstrap_servers).start(timeout=90)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)  # a loaded 2-core CI machine; conditions are awaited, not slept on
    try:
        # the console comes from the node's own production HTTP server (granian; Server: raftconnect)
        index = requests.get(node.url + "/console/", timeout=10)
        assert index.status_code == 200 and index.headers["Server"] == "raftconnect", index.headers
        page = context.new_page()
        log_in(page, node.url, *node.auth)
        page.wait_for_selector("[data-testid=nodes] tr[data-node=c1]")
        assert "LEADER" in page.inner_text("[data-testid=nodes] tr[data-node=c1]")
        assert page.inner_text("[data-testid=active-store]") == "raft"
        shot(page, "01-cluster")

        # create from the plugin form; a missing required key is shown on its field first
        page.click("text=New connector")
        page.select_option("#plugin", SOURCE)
        page.fill("#connector-name", "console-src")
        for key in ("path", "format", "topic", "batch.max.rows"):
            if not page.locator(f"[name='{key}']").count():
                page.fill("input[aria-label='new config key']", key)
                page.click("text=Add key")
        page.fill("input[name='path']", str(data))
        page.select_option("select[name='format']", "csv")  # its allowed values: a select
        page.fill("input[name='batch.max.rows']", "2000")
        page.click("button:has-text('Create')")
        error = page.wait_for_selector("tr[data-key=topic] .field-error")
        assert "topic" in error.inner_text()
        shot(page, "02-create-field-error")
        doc_shot(page, "create-form")
        page.fill("input[name='topic']", "console-topic")
        page.click("button:has-text('Create')")
        page.wait_for_url(re.compile(r"#/connectors/console-src$"))

        page.wait_for_selector("[data-testid=connector-state] [data-state=RUNNING]", timeout=SLOW)
        page.wait_for_selector("[data-testid=tasks] tr[data-task='0'] [data-state=RUNNING]", timeout=SLOW)
        # the throughput table fills from the agent's heartbeats: the task has moved records
        wait_for(lambda: int(page.inner_text("[data-testid=task-metrics] tbody tr td:nth-child(3)")) > 0, 120,
                 what="the task's record count in the console")
        shot(page, "03-running")

        page.wait_for_selector("[data-testid=topics]:has-text('console-topic')", timeout=60_000)  # KIP-558
        page.click("[data-testid=connector-actions] button:has-text('Pause')")
        page.wait_for_selector("[data-testid=connector-state] [data-state=PAUSED]", timeout=60_000)
        page.wait_for_selector("[data-testid=tasks] tr[data-task='0'] [data-state=PAUSED]", timeout=60_000)
        assert page.locator("[data-testid=connector-actions] button:has-text('Resume')").count() == 1
        shot(page, "04-paused")

        # stop (confirmed), then the offsets become editable and are written back with PATCH
        page.click("[data-testid=connector-actions] button:has-text('Stop')")
        page.click("[role=dialog] button:has-text('Stop')")
        page.wait_for_selector("[data-testid=connector-state] [data-state=STOPPED]", timeout=60_000)
        # a file source's offsets read as progress through its file
        page.wait_for_selector("[data-testid=offsets] td:has-text('%')")
        doc_shot(page, "offsets-progress")
        page.click("button:has-text('Edit as JSON')")
        page.click("button:has-text('Save offsets')")
        page.wait_for_selector("text=altered successfully")
        shot(page, "05-stopped-offsets")

        # a failed task: its trace opens from the tasks table
        node.client().create_connector("console-bad", {
            "connector.class": SOURCE, "path": str(bad), "format": "csv", "topic": "console-bad",
            "tasks.max": "1", "batch.max.rows": "500"})
        page.goto(node.url + "/console/#/connectors/console-bad")
        page.wait_for_selector("[data-testid=tasks] tr[data-task='0'] [data-state=FAILED]", timeout=SLOW)
        page.click("[data-testid=tasks] tr[data-task='0'] button:has-text('show trace')")
        assert "Traceback" in page.inner_text("[data-testid=task-trace] pre")
        shot(page, "06-failed-task-trace")

        page.goto(node.url + "/console/#/connectors")
        page.wait_for_selector("[data-testid=connector-list] tr[data-connector=console-src]")
        page.click("label.chip[data-chip=failed]")
        page.wait_for_selector("[data-testid=connector-list] tr[data-connector=console-src]", state="detached")
        assert page.locator("[data-testid=connector-list] tr[data-connector=console-bad]").count() == 1
        shot(page, "07-list-failed-filter")

        # restart the failed task (it fails again on the same row: no assertion on its next state)
        page.goto(node.url + "/console/#/connectors/console-bad")
        page.click("[data-testid=tasks] tr[data-task='0'] button:has-text('restart task')")
        page.wait_for_selector("text=Restart of task 0: request accepted")

        # a viewer reads everything and is offered no write action
        add_user(node, "watcher", "watch-pw", "viewer")
        viewer_context = browser.new_context(viewport={"width": 1400, "height": 900})
        viewer_context.set_default_timeout(60_000)
        viewer = viewer_context.new_page()
        log_in(viewer, node.url, "watcher", "watch-pw")
        assert "viewer" in viewer.inner_text("[data-testid=user]")
        viewer.goto(node.url + "/console/#/connectors/console-bad")
        viewer.wait_for_selector("[data-testid=connector-state] [data-state]")
        viewer.wait_for_selector("[data-testid=tasks] tr[data-task='0'] [data-state]")
        viewer.wait_for_selector("[data-testid=offsets], [data-testid=topics]")
        assert viewer.locator("[data-testid=connector-actions]").count() == 0
        assert viewer.locator("text=New connector").count() == 0
        assert viewer.locator("button:has-text('Edit config')").count() == 0
        assert viewer.locator("button:has-text('restart task')").count() == 0
        shot(viewer, "08-viewer")
        viewer_context.close()
    finally:
        context.close()
        node.stop()


DOCS_IMG = REPO_ROOT / "docs" / "img"


def doc_shot(page, name: str) -> None:
    """A viewport screenshot the README shows: in the artifacts, and in ``docs/img/`` when
    ``RAFTCONNECT_UPDATE_DOC_IMAGES=1`` (so a test run leaves the checkout clean)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"doc-{name}.png"))
    if os.environ.get("RAFTCONNECT_UPDATE_DOC_IMAGES") == "1":
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(DOCS_IMG / f"{name}.png"))


def test_failed_connector_everywhere_kafka_down_and_node_lost(tmp_path, browser):
    """Truthful state: every task FAILED → "failed" in list, detail and overview with its root cause;
    Kafka stopped → the console says so within 10 s naming the address; node killed → stale page,
    actions disabled, no raw TypeError."""
    from webapp.kafka.embedded import EmbeddedKafka

    good = tmp_path / "good.csv"
    good.write_text("id,name\n" + "".join(f"{i},name-{i}\n" for i in range(5000)))
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n" + "".join(f"{i},x{i}\n" for i in range(2000)) + "1,2,3,4\n")
    kafka = EmbeddedKafka(log_dir=tmp_path / "kafka").start()
    node = NodeProcess(node_id="e1", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "e1"),
                       bootstrap_servers=kafka.bootstrap_servers).start(timeout=90)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    try:
        client = node.client()
        client.create_connector("doomed", {"connector.class": SOURCE, "path": str(bad), "format": "csv",
                                           "topic": "doomed", "tasks.max": "1", "batch.max.rows": "500"})
        client.create_connector("fine", {"connector.class": SOURCE, "path": str(good), "format": "csv",
                                          "topic": "fine", "tasks.max": "1", "batch.max.rows": "1000"})
        page = context.new_page()
        log_in(page, node.url, *node.auth)

        # the list: the connector's own state may still say RUNNING, its health says failed
        page.goto(node.url + "/console/#/connectors")
        page.wait_for_selector("tr[data-connector=doomed] [data-health=failed]", timeout=SLOW)
        page.wait_for_selector("tr[data-connector=fine] [data-health=healthy]", timeout=SLOW)
        row = page.inner_text("tr[data-connector=doomed]")
        assert "1 failed" in row
        cause = page.inner_text("tr[data-connector=doomed] [data-testid=root-cause]")
        assert cause and "Traceback" not in cause and "File \"" not in cause
        assert "e1" in page.inner_text("tr[data-connector=fine] td:last-child")  # the worker by its node id
        doc_shot(page, "connectors")

        # the detail: health, counts, the cause inline, the trace one click away with library frames folded
        page.click("tr[data-connector=doomed] a")
        page.wait_for_selector("[data-testid=connector-health] [data-health=failed]")
        assert "1 failed" in page.inner_text("[data-testid=detail-counts]")
        assert page.inner_text("[data-testid=tasks] tr[data-task='0'] [data-testid=task-root-cause]") == cause
        page.click("[data-testid=tasks] tr[data-task='0'] button:has-text('show trace')")
        assert "Traceback" in page.inner_text("[data-testid=task-trace] pre")
        doc_shot(page, "connector-failed")

        # the overview counts it, lists it with its cause, and shows Kafka with its topics
        page.goto(node.url + "/console/#/")
        page.wait_for_selector("[data-testid=health-counts] [data-count=failed] strong:text-is('1')")
        assert "doomed" in page.inner_text("[data-testid=failing]")
        assert "fine" not in page.inner_text("[data-testid=failing]")
        page.wait_for_selector("[data-testid=kafka] [data-state=REACHABLE]")
        assert page.inner_text("[data-testid=bootstrap]") == kafka.bootstrap_servers
        page.wait_for_selector("[data-testid=kafka-topics] tr[data-topic=fine]", timeout=SLOW)
        page.wait_for_selector("[data-testid=last-updated]:has-text('updated')")
        page.wait_for_selector("[data-testid=overview-chart] .legend li", timeout=SLOW)  # sampled every 5 s
        doc_shot(page, "overview")

        # Kafka stops: within 10 s the console says so and names the address it tried
        kafka.stop()
        page.wait_for_selector("[data-testid=kafka] [data-state=UNREACHABLE]", timeout=10_000)
        assert kafka.bootstrap_servers in page.inner_text("[data-testid=kafka-error]")
        doc_shot(page, "kafka-unreachable")

        # the node dies: the page says so, greys out what it showed and disables every action
        page.goto(node.url + "/console/#/connectors/fine")
        page.wait_for_selector("[data-testid=connector-actions] button:has-text('Pause')")
        assert page.locator("[data-testid=connector-actions] button:has-text('Pause')").is_enabled()
        node.kill()
        page.wait_for_selector("[data-testid=connection-lost]", timeout=15_000)
        page.wait_for_selector("main[data-stale=true]")
        banner = page.inner_text("[data-testid=connection-lost]")
        assert "e1" in banner and "actions are disabled" in banner
        assert page.locator("[data-testid=connector-actions] button:has-text('Pause')").is_disabled()
        assert page.locator("main button").count() > 3 and page.locator("main button:enabled").count() == 0
        page.wait_for_selector("[data-testid=connection-lost]:has-text('No other node')")
        assert "TypeError" not in page.inner_text("body")
        doc_shot(page, "node-lost")
    finally:
        context.close()
        node.stop()
        kafka.stop()


def test_console_fails_over_to_another_node_when_its_node_dies(tmp_path, browser):
    """Three Raft members (no workers: nothing to run); the browser's node is killed; the console finds
    another member that answers and moves there, where the login still holds (the session is a cookie the
    cluster's key signed, and the browser sends it to every port of the host), and sees the cluster."""
    from tools.launcher import LocalCluster

    cluster = LocalCluster(data_dir=str(tmp_path / "cluster"), bootstrap_servers="127.0.0.1:9", raft_nodes=3,
                           raft_roles="raft").start(timeout=120)
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.set_default_timeout(60_000)
    try:
        first = cluster.nodes[0]
        page = context.new_page()
        log_in(page, first.url, *first.auth)
        page.wait_for_selector("[data-testid=nodes] tr[data-node=node-3]")  # the console knows the others now
        first.kill()
        page.wait_for_selector("[data-testid=failover-link]", timeout=30_000)
        banner = page.inner_text("[data-testid=connection-lost]")
        assert "node-1" in banner and "moving in" in banner
        page.wait_for_url(re.compile(r"^http://127\.0\.0\.1:(%d|%d)/console/" % (
            cluster.nodes[1].rest_port, cluster.nodes[2].rest_port)), timeout=30_000)
        page.wait_for_selector("[data-testid=nodes] tr[data-node=node-1]")  # no login asked for
        assert page.locator("#username").count() == 0
        assert page.locator("[data-testid=connection-lost]").count() == 0
    finally:
        context.close()
        cluster.stop()
