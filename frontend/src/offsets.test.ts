import { describe, expect, it } from "vitest";
import { progress, resetBody } from "./offsets";
import type { SinkPartitionOffsets } from "./types";

const rows: SinkPartitionOffsets[] = [
  { topic: "t", partition: 0, committed: 5, start_offset: 2, end_offset: 9, lag: 4, offset_for_timestamp: 7 },
  { topic: "t", partition: 1, committed: null, start_offset: 0, end_offset: null, lag: null, offset_for_timestamp: null },
];

describe("resetting a sink's offsets", () => {
  it("builds Connect's PATCH body for earliest, latest, a timestamp and given offsets", () => {
    const at = (mode: Parameters<typeof resetBody>[1], given?: Record<string, string>) =>
      resetBody(rows, mode, given)?.offsets.map((o) => [o.partition.kafka_partition, o.offset.kafka_offset]);
    expect(at("earliest")).toEqual([[0, 2], [1, 0]]);
    expect(at("latest")).toEqual([[0, 9]]); // partition 1's end is unknown: left out
    expect(at("timestamp")).toEqual([[0, 7]]);
    expect(at("offset", { "t:0": "3", "t:1": "x" })).toEqual([[0, 3]]);
    expect(resetBody(rows, "offset", {})).toBeNull();
    expect(resetBody(rows, "earliest")!.offsets[0]).toEqual({ partition: { kafka_topic: "t", kafka_partition: 0 }, offset: { kafka_offset: 2 } });
  });

  it("says a file's progress", () => {
    expect(progress(50, 200)).toBe("25 %");
    expect(progress(250, 200)).toBe("100 %");
    expect(progress(10, null)).toBeNull();
  });
});
