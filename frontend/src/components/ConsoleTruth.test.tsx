import { act, cleanup, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { connection } from "../connection";
import type { ConnectorsHealth } from "../types";
import { ConnectionBanner } from "./ConnectionBanner";
import { ConnectorList } from "./ConnectorList";
import { TraceView } from "./TraceView";

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status });

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
  connection.ok();
});

describe("the connector list", () => {
  it("shows a connector whose tasks all failed as failed, with the cause inline and the worker by node id", async () => {
    const health: ConnectorsHealth = {
      connectors: [
        {
          name: "doomed", type: "source", state: "RUNNING", health: "failed", task_counts: { RUNNING: 0, FAILED: 2 }, tasks_total: 2,
          worker: { node_id: "n1", rest_address: "127.0.0.1:8083" }, root_cause: "ConnectException: bad row 7", tasks: [],
        },
      ],
      health: { healthy: 0, degraded: 0, unassigned: 0, failed: 1 },
      tasks: { RUNNING: 0, FAILED: 2 },
      generated_at: 1,
    };
    vi.stubGlobal("fetch", vi.fn(async (url: string) =>
      url.startsWith("/raftconnect/v1/console/connectors") ? json(health) : json({ doomed: { info: { config: { "connector.class": "FileSourceConnector" } } } }),
    ));
    render(<ConnectorList writable={false} />);
    const badge = await screen.findByText("failed", { selector: "[data-health]" });
    expect(badge.getAttribute("data-health")).toBe("failed");
    expect(screen.getByText("RUNNING").getAttribute("data-state")).toBe("RUNNING"); // its own state, shown beside
    expect(screen.getByTestId("root-cause").textContent).toBe("ConnectException: bad row 7");
    expect(screen.getByTestId("task-counts").textContent).toContain("2 failed");
    const worker = document.querySelector("[data-worker=n1]")!;
    expect(worker.textContent).toBe("n1");
    expect(worker.getAttribute("title")).toContain("127.0.0.1:8083");
    expect(screen.getByText(/failed \(1\)/)).toBeTruthy();
  });
});

describe("the connection banner", () => {
  it("says when it updated, then that the node is lost, and offers the other node that answers", async () => {
    vi.stubGlobal("fetch", vi.fn(async (_url: string, init?: RequestInit) => {
      if (init?.mode === "no-cors") return new Response(null, { status: 200 }); // n2's /health answers
      // answered by the leader n2; this console is n1's (jsdom's page host)
      return json({ node_id: "n2", nodes: [{ id: "n1", rest_address: window.location.host }, { id: "n2", rest_address: "127.0.0.1:8084" }] });
    }));
    const navigate = vi.fn();
    render(<ConnectionBanner navigate={navigate} />);
    await screen.findByText(/^updated /);
    await vi.waitFor(() => expect(connection.others().map((n) => n.id)).toEqual(["n2"]));
    act(() => connection.failed("The node at localhost does not answer"));
    const lost = await screen.findByTestId("connection-lost");
    expect(lost.textContent).toContain(`Lost contact with node n1 (${window.location.host})`);
    expect(lost.textContent).toContain("actions are disabled");
    const link = await screen.findByTestId("failover-link");
    expect(link.getAttribute("href")).toBe("http://127.0.0.1:8084/console/");
    act(() => connection.ok());
    await screen.findByText(/^updated /);
    expect(screen.queryByTestId("connection-lost")).toBeNull();
  });
});

describe("a trace", () => {
  it("folds library frames behind a button that shows them", async () => {
    const trace = [
      "Traceback (most recent call last):",
      '  File "/app/webapp/runtime/worker.py", line 1, in _step',
      "    x()",
      '  File "/venv/lib/python3.11/site-packages/pyspark/a.py", line 1, in a',
      "    b()",
      '  File "/venv/lib/python3.11/site-packages/pyspark/b.py", line 2, in b',
      "    c()",
      "ValueError: boom",
    ].join("\n");
    render(<TraceView trace={trace} />);
    const fold = screen.getByRole("button", { name: /4 internal lines/ });
    expect(screen.getByTestId("trace").textContent).not.toContain("pyspark/a.py");
    expect(screen.getByTestId("trace").textContent).toContain("ValueError: boom");
    act(() => fold.click());
    expect(screen.getByTestId("trace").textContent).toContain("pyspark/a.py");
  });
});
