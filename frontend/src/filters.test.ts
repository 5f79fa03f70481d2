import { describe, expect, it } from "vitest";
import { filterRows, rows } from "./filters";
import type { ExpandedConnectors } from "./types";

const status = (name: string, state: string, tasks: string[]) => ({
  name,
  type: "source",
  connector: { state, worker_id: "127.0.0.1:8083" },
  tasks: tasks.map((s, id) => ({ id, state: s, worker_id: "127.0.0.1:8083" })),
});
const info = (name: string, cls: string) => ({ name, type: "source", tasks: [], config: { "connector.class": cls } });

const expanded: ExpandedConnectors = {
  "orders-src": { status: status("orders-src", "RUNNING", ["RUNNING", "FAILED"]), info: info("orders-src", "FileSourceConnector") },
  "flights-sink": { status: status("flights-sink", "PAUSED", ["PAUSED"]), info: info("flights-sink", "FileSinkConnector") },
  "idle": { status: status("idle", "STOPPED", []), info: info("idle", "FileSourceConnector") },
};

describe("connector rows", () => {
  it("summarise state and tasks, sorted by name", () => {
    const r = rows(expanded);
    expect(r.map((x) => x.name)).toEqual(["flights-sink", "idle", "orders-src"]);
    expect(r[2]).toMatchObject({ state: "RUNNING", tasksRunning: 1, tasksTotal: 2, failedTasks: 1 });
  });

  it("filter by state (a failed task counts as FAILED) and search name or class", () => {
    const r = rows(expanded);
    expect(filterRows(r, new Set(), "").length).toBe(3);
    expect(filterRows(r, new Set(["PAUSED", "STOPPED"]), "").map((x) => x.name)).toEqual(["flights-sink", "idle"]);
    expect(filterRows(r, new Set(["FAILED"]), "").map((x) => x.name)).toEqual(["orders-src"]);
    expect(filterRows(r, new Set(), "SINK").map((x) => x.name)).toEqual(["flights-sink"]);
    expect(filterRows(r, new Set(["RUNNING"]), "sink")).toEqual([]);
  });
});
