import { describe, expect, it } from "vitest";
import { filterRows, rows } from "./filters";
import type { ConnectorHealth, Health } from "./types";

const h = (name: string, state: string, health: Health, counts: Record<string, number>, type = "source"): ConnectorHealth => ({
  name,
  type,
  state,
  health,
  task_counts: counts,
  tasks_total: Object.values(counts).reduce((a, b) => a + b, 0),
  worker: { node_id: "n1", rest_address: "127.0.0.1:8083" },
  root_cause: health === "failed" || health === "degraded" ? "ConnectException: bad row" : null,
  tasks: [],
});

const health = [
  h("orders-src", "RUNNING", "degraded", { RUNNING: 1, FAILED: 1 }),
  h("flights-sink", "PAUSED", "healthy", { PAUSED: 1 }, "sink"),
  h("all-failed", "RUNNING", "failed", { FAILED: 2 }),
];
const classes = { "orders-src": "FileSourceConnector", "flights-sink": "FileSinkConnector", "all-failed": "FileSourceConnector" };

describe("connector rows", () => {
  it("carry the server's health, counts and root cause, sorted by name", () => {
    const r = rows(health, classes);
    expect(r.map((x) => x.name)).toEqual(["all-failed", "flights-sink", "orders-src"]);
    expect(r[2]).toMatchObject({ state: "RUNNING", health: "degraded", tasksRunning: 1, tasksTotal: 2, failedTasks: 1 });
    // a connector whose every task failed is failed, whatever its own state says
    expect(r[0]).toMatchObject({ state: "RUNNING", health: "failed", rootCause: "ConnectException: bad row" });
  });

  it("filter by health and search name or class", () => {
    const r = rows(health, classes);
    expect(filterRows(r, new Set(), "").length).toBe(3);
    expect(filterRows(r, new Set(["failed"]), "").map((x) => x.name)).toEqual(["all-failed"]);
    expect(filterRows(r, new Set(["failed", "degraded"]), "").map((x) => x.name)).toEqual(["all-failed", "orders-src"]);
    expect(filterRows(r, new Set(), "SINK").map((x) => x.name)).toEqual(["flights-sink"]);
    expect(filterRows(r, new Set(["failed"]), "sink")).toEqual([]);
  });
});
