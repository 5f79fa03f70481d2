import type { ExpandedConnectors } from "./types";

export const STATES = ["RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED", "RESTARTING"] as const;

export interface Row {
  name: string;
  type: string;
  connectorClass: string;
  state: string;
  tasksRunning: number;
  tasksTotal: number;
  failedTasks: number;
  worker: string | null;
}

/** Table rows from GET /connectors?expand=status&expand=info, sorted by name. */
export function rows(expanded: ExpandedConnectors): Row[] {
  return Object.entries(expanded)
    .map(([name, e]) => {
      const tasks = e.status?.tasks ?? [];
      return {
        name,
        type: e.status?.type ?? e.info?.type ?? "",
        connectorClass: e.info?.config["connector.class"] ?? "",
        state: e.status?.connector.state ?? "UNKNOWN",
        tasksRunning: tasks.filter((t) => t.state === "RUNNING").length,
        tasksTotal: tasks.length,
        failedTasks: tasks.filter((t) => t.state === "FAILED").length,
        worker: e.status?.connector.worker_id ?? null,
      };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Rows whose connector state is in `states` (all when empty) — a connector with a FAILED task counts as
 * FAILED too — and whose name, class or type contains `search` (case-insensitive).
 */
export function filterRows(all: Row[], states: Set<string>, search: string): Row[] {
  const q = search.trim().toLowerCase();
  return all.filter(
    (r) =>
      (states.size === 0 || states.has(r.state) || (states.has("FAILED") && r.failedTasks > 0)) &&
      (!q || r.name.toLowerCase().includes(q) || r.connectorClass.toLowerCase().includes(q) || r.type.includes(q)),
  );
}
