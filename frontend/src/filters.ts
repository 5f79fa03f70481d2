import type { ConnectorHealth, Health, WorkerName } from "./types";

export interface Row {
  name: string;
  type: string;
  connectorClass: string;
  state: string;
  health: Health;
  counts: Record<string, number>;
  tasksRunning: number;
  tasksTotal: number;
  failedTasks: number;
  worker: WorkerName | null;
  rootCause: string | null;
}

/** Table rows from the server's health list and the connectors' classes (GET /connectors?expand=info), sorted by name. */
export function rows(health: ConnectorHealth[], classes: Record<string, string> = {}): Row[] {
  return health
    .map((c) => ({
      name: c.name,
      type: c.type ?? "",
      connectorClass: classes[c.name] ?? "",
      state: c.state,
      health: c.health,
      counts: c.task_counts,
      tasksRunning: c.task_counts.RUNNING ?? 0,
      tasksTotal: c.tasks_total,
      failedTasks: c.task_counts.FAILED ?? 0,
      worker: c.worker,
      rootCause: c.root_cause,
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** Rows whose health is in `healths` (all when empty) and whose name, class or type contains `search` (case-insensitive). */
export function filterRows(all: Row[], healths: Set<string>, search: string): Row[] {
  const q = search.trim().toLowerCase();
  return all.filter(
    (r) =>
      (healths.size === 0 || healths.has(r.health)) &&
      (!q || r.name.toLowerCase().includes(q) || r.connectorClass.toLowerCase().includes(q) || r.type.includes(q)),
  );
}
