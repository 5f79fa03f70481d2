import { describe, expect, it } from "vitest";
import { History, RateTracker } from "./rates";

describe("RateTracker", () => {
  it("gives records/s over the window once two samples exist", () => {
    const r = new RateTracker(10);
    r.add("t0", 100, 0);
    expect(r.rate("t0")).toBeNull();
    r.add("t0", 102, 1000);
    r.add("t0", 104, 1000); // a stale heartbeat: same counter, rate still averages over the window
    expect(r.rate("t0")).toBe(250);
    r.add("t0", 106, 3000);
    expect(r.rate("t0")).toBe(500);
  });

  it("slides the window so old samples stop counting", () => {
    const r = new RateTracker(4);
    for (let t = 0; t <= 10; t += 2) r.add("k", t, t < 6 ? t * 100 : 600); // busy, then idle from t=6
    expect(r.rate("k")).toBe(0);
  });

  it("starts over when a counter goes down (the task restarted)", () => {
    const r = new RateTracker(10);
    r.add("k", 0, 5000);
    r.add("k", 2, 7000);
    r.add("k", 4, 100);
    expect(r.rate("k")).toBeNull();
    r.add("k", 6, 300);
    expect(r.rate("k")).toBe(100);
  });

  it("ignores a repeated instant and forgets keys no longer reported", () => {
    const r = new RateTracker(10);
    r.add("a", 1, 10);
    r.add("a", 1, 50);
    r.add("b", 1, 0);
    r.retain(new Set(["a"]));
    expect(r.keys()).toEqual(["a"]);
    r.add("a", 3, 30);
    expect(r.rate("a")).toBe(10);
  });
});

describe("History", () => {
  it("aligns series on shared times, fills gaps with null and stays bounded", () => {
    const h = new History(3);
    h.push(1, { a: 1 });
    h.push(2, { a: 2, b: 5 });
    h.push(3, { b: 6 });
    expect(h.series.get("a")).toEqual([1, 2, null]);
    expect(h.series.get("b")).toEqual([null, 5, 6]);
    h.push(4, { b: 7 });
    h.push(5, { b: 8 });
    expect(h.times).toEqual([3, 4, 5]);
    expect(h.names()).toEqual(["b"]); // "a" has no value left in the window
  });
});
