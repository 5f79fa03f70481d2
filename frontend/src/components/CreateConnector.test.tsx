import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { CreateConnector } from "./CreateConnector";

const PLUGIN = "raftconnect.connectors.file.FileSourceConnector";
const key = (name: string, required: boolean, def: string | null = null) => ({
  name, type: "STRING", required, default_value: def, importance: "HIGH", documentation: `${name} doc`,
});
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status });

describe("CreateConnector with Connect's plugin endpoints", () => {
  let calls: { method: string; url: string; body: unknown }[];
  beforeEach(() => {
    calls = [];
    vi.stubGlobal("fetch", vi.fn(async (url: string, init: RequestInit) => {
      const method = init.method ?? "GET";
      calls.push({ method, url, body: init.body ? JSON.parse(String(init.body)) : undefined });
      if (url === "/connector-plugins") return json([{ class: PLUGIN, type: "source", version: "0.1.0" }]);
      if (url.endsWith("/config") && method === "GET") return json([key("path", true), key("topic", true), key("format", false, "csv")]);
      if (url.endsWith("/config/validate")) {
        const cfg = JSON.parse(String(init.body));
        const value = (name: string, errors: string[]) => ({ name, value: cfg[name] ?? null, recommended_values: [], errors, visible: true });
        const topicErrors = cfg.topic ? [] : ['Missing required configuration "topic" which has no default value.'];
        return json({
          name: PLUGIN, error_count: topicErrors.length, groups: [],
          configs: [
            { definition: key("path", true), value: value("path", []) },
            { definition: key("topic", true), value: value("topic", topicErrors) },
          ],
        });
      }
      if (url === "/connectors" && method === "POST") return json({ name: "c1", config: {}, tasks: [], type: "source" }, 201);
      return json({ error_code: 404, message: `HTTP 404 Not Found: ${url}` }, 404);
    }));
  });
  afterEach(() => {
    cleanup();
    vi.unstubAllGlobals();
  });

  it("renders the plugin's keys, shows validate's errors on their field and creates only a valid config", async () => {
    render(<CreateConnector />);
    await screen.findByRole("option", { name: /FileSourceConnector/ });
    fireEvent.change(screen.getByLabelText("Plugin"), { target: { value: PLUGIN } });
    const path = (await screen.findByLabelText(/^path/)) as HTMLInputElement;
    expect((screen.getByLabelText(/^format/) as HTMLInputElement).placeholder).toBe("csv"); // default as a hint
    fireEvent.change(screen.getByLabelText("Name"), { target: { value: "c1" } });
    fireEvent.change(path, { target: { value: "/data/in.csv" } });
    fireEvent.click(screen.getByRole("button", { name: "Create" }));

    const error = await screen.findByText(/Missing required configuration "topic"/);
    expect(error.closest("tr")?.getAttribute("data-key")).toBe("topic");
    expect(calls.some((c) => c.method === "POST")).toBe(false);

    fireEvent.change(screen.getByLabelText(/^topic/), { target: { value: "t" } });
    fireEvent.click(screen.getByRole("button", { name: "Create" }));
    await vi.waitFor(() => expect(calls.some((c) => c.method === "POST")).toBe(true), { timeout: 15000 });
    const post = calls.find((c) => c.method === "POST")!;
    expect(post.body).toEqual({
      name: "c1",
      config: { "connector.class": PLUGIN, "tasks.max": "1", path: "/data/in.csv", topic: "t" },
    });
    expect(window.location.hash).toBe("#/connectors/c1");
  });
});
