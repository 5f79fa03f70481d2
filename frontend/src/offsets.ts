// Resetting a sink's offsets through Kafka Connect's offsets API (PATCH /connectors/{name}/offsets).

import type { SinkPartitionOffsets } from "./types";

export type ResetMode = "earliest" | "latest" | "timestamp" | "offset";

/**
 * Connect's body for PATCH /connectors/{name}/offsets moving each of `rows` to the offset `mode` picks:
 * its start, its end, the first offset at or after the timestamp (`offset_for_timestamp`, asked of the
 * server with ?timestamp=) or `offsets[i]` given per partition. A partition whose target is unknown is
 * left out; none known gives null.
 */
export function resetBody(
  rows: SinkPartitionOffsets[],
  mode: ResetMode,
  given: Record<string, string> = {},
): { offsets: { partition: { kafka_topic: string; kafka_partition: number }; offset: { kafka_offset: number } }[] } | null {
  const offsets = [];
  for (const r of rows) {
    let target: number | null | undefined;
    if (mode === "earliest") target = r.start_offset;
    else if (mode === "latest") target = r.end_offset;
    else if (mode === "timestamp") target = r.offset_for_timestamp;
    else {
      const text = (given[`${r.topic}:${r.partition}`] ?? "").trim();
      target = /^\d+$/.test(text) ? Number(text) : null;
    }
    if (target === null || target === undefined) continue;
    offsets.push({ partition: { kafka_topic: r.topic, kafka_partition: r.partition }, offset: { kafka_offset: target } });
  }
  return offsets.length ? { offsets } : null;
}

/** "42 %" of a file read so far, or null without a size. */
export function progress(position: number | null, size: number | null): string | null {
  if (position === null || size === null || size <= 0) return null;
  return `${Math.min(100, Math.round((100 * position) / size))} %`;
}
