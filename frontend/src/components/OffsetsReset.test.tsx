import { cleanup, fireEvent, render, screen, within } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { Offsets } from "./ConnectorDetail";

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("a stopped sink's offsets", () => {
  it("show lag per partition and reset to latest through Connect's PATCH", async () => {
    const patches: unknown[] = [];
    vi.stubGlobal("fetch", vi.fn(async (url: string, init?: RequestInit) => {
      if (init?.method === "PATCH") {
        patches.push(JSON.parse(String(init.body)));
        return new Response(JSON.stringify({ message: "The offsets for this connector have been altered successfully" }));
      }
      if (url.startsWith("/raftconnect/v1/console/connectors/s/offsets"))
        return new Response(JSON.stringify({ kind: "sink", partitions: [
          { topic: "t", partition: 0, committed: 4, start_offset: 0, end_offset: 10, lag: 6 },
          { topic: "t", partition: 1, committed: null, start_offset: 2, end_offset: 3, lag: 1 },
        ] }));
      return new Response(JSON.stringify({ offsets: [{ partition: { kafka_topic: "t", kafka_partition: 0 }, offset: { kafka_offset: 4 } }] }));
    }));
    render(<Offsets name="s" state="STOPPED" writable />);
    await vi.waitFor(() => expect(screen.getAllByTestId("lag").map((c) => c.textContent)).toEqual(["6", "1"]));
    fireEvent.click(screen.getByRole("button", { name: "Reset to…" }));
    const dialog = screen.getByRole("dialog");
    fireEvent.click(within(dialog).getByRole("radio", { name: /latest/ }));
    expect(within(dialog).getByTestId("reset-preview").textContent).toContain("t:0410t:1none3");
    fireEvent.click(within(dialog).getByRole("button", { name: "Write these offsets" }));
    await screen.findByText(/altered successfully/);
    expect(patches).toEqual([{ offsets: [
      { partition: { kafka_topic: "t", kafka_partition: 0 }, offset: { kafka_offset: 10 } },
      { partition: { kafka_topic: "t", kafka_partition: 1 }, offset: { kafka_offset: 3 } },
    ] }]);
  });

  it("offer no reset while the connector runs", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => new Response(JSON.stringify({ kind: "sink", partitions: [], offsets: [] }))));
    render(<Offsets name="s" state="RUNNING" writable />);
    await screen.findByText(/Stop the connector/);
    expect(screen.queryByRole("button", { name: "Reset to…" })).toBeNull();
  });
});
