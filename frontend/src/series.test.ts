import { describe, expect, it } from "vitest";
import { chartData, formatValue, lastValue, tickStep } from "./series";
import type { TaskHistoryBody } from "./types";

const body: TaskHistoryBody = {
  interval: 5,
  keep_seconds: 900,
  tasks: [
    { connector: "a", task: 0, worker: "n1", points: [[100, null, 5, null, 0], [105, 10, 4, 0, 0], [110, 20, 3, 1.5, 2]] },
    { connector: "a", task: 1, worker: "n2", points: [[105, null, null, null, 0], [110, 5, null, 0, 0]] },
    { connector: "b", task: 0, worker: "n1", points: [[110, 7, null, null, 0]] },
  ],
};

describe("chart data from the server's history", () => {
  it("sums tasks per connector on shared times, gaps stay gaps", () => {
    const d = chartData(body, "rate");
    expect(d.times).toEqual([100, 105, 110]);
    expect(d.series).toEqual([
      { name: "a", values: [null, 10, 25] },
      { name: "b", values: [null, null, 7] },
    ]);
  });

  it("groups per task with a total, and drops series without any value", () => {
    const d = chartData({ ...body, tasks: body.tasks.slice(0, 2) }, "rate", (t) => `task ${t.task}`, true);
    expect(d.series.map((s) => s.name)).toEqual(["task 0", "task 1", "total"]);
    expect(d.series[2].values).toEqual([null, 10, 25]);
    expect(chartData(body, "lag").series.map((s) => s.name)).toEqual(["a"]);
    expect(chartData(body, "errors").series[0].values).toEqual([null, 0, 1.5]);
  });

  it("label legends with the latest value and tick on whole steps", () => {
    expect(lastValue([1, 2, null])).toBe(2);
    expect(lastValue([null])).toBeNull();
    expect(formatValue(null)).toBe("no data");
    expect(formatValue(1234.5)).toBe("1,235");
    expect(formatValue(12.345)).toBe("12.3");
    expect(formatValue(0)).toBe("0");
    expect(tickStep(900)).toBe(120); // 15 minutes: every 2 minutes, never every 100 ms
    expect(tickStep(30)).toBe(10);
    expect(tickStep(0.5)).toBe(10);
  });
});
