// Chart data from the server's per-task history (GET /raftconnect/v1/console/history).
//
// The node samples every task at the same instants, so points of different tasks share their
// times; a task missing at an instant is a gap (null), not a zero.

import type { TaskHistoryBody } from "./types";

export type Metric = "rate" | "lag" | "errors";

const COLUMN: Record<Metric, 1 | 2 | 3> = { rate: 1, lag: 2, errors: 3 };

export interface Series {
  name: string;
  values: (number | null)[];
}

export interface ChartData {
  /** epoch seconds, ascending */
  times: number[];
  series: Series[];
}

/**
 * One series per key of `group` (default: per connector, summed over its tasks) of `metric`.
 * `total` adds a "total" series when there is more than one.
 */
export function chartData(
  body: TaskHistoryBody,
  metric: Metric,
  group: (t: TaskHistoryBody["tasks"][number]) => string = (t) => t.connector,
  total = false,
): ChartData {
  const col = COLUMN[metric];
  const times = [...new Set(body.tasks.flatMap((t) => t.points.map((p) => p[0])))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  const byName = new Map<string, (number | null)[]>();
  for (const task of body.tasks) {
    const name = group(task);
    let values = byName.get(name);
    if (!values) byName.set(name, (values = new Array<number | null>(times.length).fill(null)));
    for (const p of task.points) {
      const v = p[col];
      if (v === null || v === undefined) continue;
      const i = index.get(p[0])!;
      values[i] = (values[i] ?? 0) + v;
    }
  }
  const series = [...byName.entries()]
    .filter(([, v]) => v.some((x) => x !== null))
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, values]) => ({ name, values }));
  if (total && series.length > 1) {
    const sum = times.map((_, i) => {
      const vs = series.map((s) => s.values[i]).filter((x): x is number => x !== null);
      return vs.length ? vs.reduce((a, b) => a + b, 0) : null;
    });
    series.push({ name: "total", values: sum });
  }
  return { times, series };
}

/** The last non-null value of a series (for the legend), or null. */
export function lastValue(values: (number | null)[]): number | null {
  for (let i = values.length - 1; i >= 0; i--) if (values[i] !== null) return values[i];
  return null;
}

/** A short number for legends: 1234 → "1,234", 12.345 → "12.3", 0.0123 → "0.012". */
export function formatValue(v: number | null): string {
  if (v === null) return "no data";
  if (Math.abs(v) >= 100) return Math.round(v).toLocaleString("en-US");
  if (Math.abs(v) >= 1) return v.toFixed(1);
  return v === 0 ? "0" : v.toPrecision(2);
}

/** Seconds between x-axis ticks for a span of `seconds`: whole steps of 10 s, 30 s, 1, 2, 5, 10, 15 min. */
export function tickStep(seconds: number, maxTicks = 8): number {
  for (const step of [10, 30, 60, 120, 300, 600, 900, 1800, 3600]) if (seconds / step <= maxTicks) return step;
  return 3600;
}
