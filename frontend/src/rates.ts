// Records/s from the cumulative per-task counters the agents report in heartbeats.
//
// The counters (`records`) are at most one heartbeat old and are polled every
// 2 s, so a rate from two successive polls jumps between 0 and twice the truth;
// the rate is taken over a sliding window instead. A counter that goes down
// means the task restarted (its counters start at 0): its older samples are dropped.

export interface Sample {
  t: number; // seconds
  records: number;
}

export class RateTracker {
  private samples = new Map<string, Sample[]>();

  constructor(private windowSeconds = 10) {}

  /** Record counter `records` of `key` seen at time `t` (seconds). */
  add(key: string, t: number, records: number): void {
    let s = this.samples.get(key) ?? [];
    const last = s[s.length - 1];
    if (last && (records < last.records || t <= last.t)) {
      if (records < last.records) s = [];
      else return; // same instant twice: keep the first
    }
    s.push({ t, records });
    while (s.length > 2 && s[1].t <= t - this.windowSeconds) s.shift();
    this.samples.set(key, s);
  }

  /** Records per second of `key` over the window, or null until two samples exist. */
  rate(key: string): number | null {
    const s = this.samples.get(key);
    if (!s || s.length < 2) return null;
    const first = s[0];
    const last = s[s.length - 1];
    return (last.records - first.records) / (last.t - first.t);
  }

  /** Forget every key not in `keep` (tasks that stopped or moved away). */
  retain(keep: Set<string>): void {
    for (const k of [...this.samples.keys()]) if (!keep.has(k)) this.samples.delete(k);
  }

  keys(): string[] {
    return [...this.samples.keys()].sort();
  }
}

/** A bounded time series of several named values (for the chart): null where a series had no value. */
export class History {
  times: number[] = [];
  series = new Map<string, (number | null)[]>();

  constructor(private maxPoints = 150) {}

  push(t: number, values: Record<string, number | null>): void {
    this.times.push(t);
    for (const name of Object.keys(values)) {
      if (!this.series.has(name)) this.series.set(name, new Array(this.times.length - 1).fill(null));
    }
    for (const [name, arr] of this.series) arr.push(name in values ? values[name] : null);
    if (this.times.length > this.maxPoints) {
      this.times.shift();
      for (const arr of this.series.values()) arr.shift();
    }
    for (const [name, arr] of [...this.series]) if (arr.every((v) => v === null)) this.series.delete(name);
  }

  names(): string[] {
    return [...this.series.keys()].sort();
  }
}
