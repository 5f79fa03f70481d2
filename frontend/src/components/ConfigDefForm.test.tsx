import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parsePastedConfig } from "../plugins";
import type { ConfigKeyInfo } from "../types";
import { ConfigForm } from "./ConfigForm";
import { CreateConnector } from "./CreateConnector";

const key = (name: string, type: string, extra: Partial<ConfigKeyInfo> = {}): ConfigKeyInfo => ({
  name, type, required: false, default_value: null, importance: "MEDIUM", documentation: `doc of ${name}`, ...extra,
});

afterEach(() => {
  cleanup();
  vi.unstubAllGlobals();
});

describe("a pasted Connect config", () => {
  it("is accepted nested or flat, values as strings", () => {
    expect(parsePastedConfig('{"name": "a", "config": {"connector.class": "X", "tasks.max": 2}}')).toEqual({
      name: "a", config: { "connector.class": "X", "tasks.max": "2" },
    });
    expect(parsePastedConfig('{"name": "b", "connector.class": "X", "enabled": true}')).toEqual({
      name: "b", config: { "connector.class": "X", enabled: "true" },
    });
    expect(() => parsePastedConfig("{")).toThrow(/Not valid JSON/);
    expect(() => parsePastedConfig('{"name": "c", "config": {}}')).toThrow(/connector.class/);
    expect(() => parsePastedConfig('{"connector.class": "X", "a": {"b": 1}}')).toThrow(/a must be/);
  });
});

describe("the ConfigDef form", () => {
  it("uses a toggle for booleans, a select for allowed values, marks required keys and shows their docs", () => {
    const onChange = vi.fn();
    const defs = [
      key("errors.tolerance", "STRING", { default_value: "none" }),
      key("schemas.enable", "BOOLEAN", { default_value: "true" }),
      key("topic", "STRING", { required: true }),
    ];
    render(
      <ConfigForm config={{ "connector.class": "X" }} definitions={defs} errors={{}} readOnly={false} onChange={onChange}
        recommended={{ "errors.tolerance": ["none", "all"] }} />,
    );
    const select = document.querySelector("select[name='errors.tolerance']") as HTMLSelectElement;
    expect([...select.options].map((o) => o.value)).toEqual(["", "none", "all"]);
    expect(select.options[0].textContent).toBe("default (none)");
    fireEvent.change(select, { target: { value: "all" } });
    expect(onChange).toHaveBeenLastCalledWith({ "connector.class": "X", "errors.tolerance": "all" });

    const toggle = screen.getByRole("switch") as HTMLInputElement;
    expect(toggle.checked).toBe(true); // its default
    fireEvent.click(toggle);
    expect(onChange).toHaveBeenLastCalledWith({ "connector.class": "X", "schemas.enable": "false" });

    const topicRow = document.querySelector("tr[data-key=topic]")!;
    expect(topicRow.querySelector(".required")).not.toBeNull();
    expect(topicRow.textContent).toContain("doc of topic");
  });
});

describe("creating from pasted JSON", () => {
  it("fills the form from a pasted config and validates it on demand", async () => {
    const calls: string[] = [];
    vi.stubGlobal("fetch", vi.fn(async (url: string, init?: RequestInit) => {
      calls.push(`${init?.method} ${url}`);
      if (url === "/connector-plugins") return new Response(JSON.stringify([{ class: "my.Source", type: "source", version: "1" }]));
      if (url.endsWith("/config") && init?.method === "GET") return new Response(JSON.stringify([key("topic", "STRING", { required: true })]));
      const body = JSON.parse(String(init?.body ?? "{}"));
      const err = body.topic ? [] : ["Missing required configuration topic which has no default value."];
      return new Response(JSON.stringify({ name: "my.Source", error_count: err.length, groups: [], configs: [
        { definition: key("topic", "STRING", { required: true }), value: { name: "topic", value: body.topic ?? null, recommended_values: [], errors: err, visible: true } },
      ] }));
    }));
    render(<CreateConnector />);
    fireEvent.click(await screen.findByRole("tab", { name: "JSON" }));
    fireEvent.change(screen.getByLabelText("connector JSON"), {
      target: { value: '{"name": "pasted", "config": {"connector.class": "my.Source", "tasks.max": "1"}}' },
    });
    fireEvent.click(screen.getByRole("button", { name: "Use this config" }));
    expect(((await screen.findByLabelText("Name")) as HTMLInputElement).value).toBe("pasted");
    await screen.findByText("doc of topic");
    fireEvent.click(screen.getByRole("button", { name: "Validate" }));
    await screen.findByText(/Missing required configuration/);
    expect(calls.some((c) => c.startsWith("PUT /connector-plugins/my.Source/config/validate"))).toBe(true);
    expect(calls.some((c) => c.startsWith("POST /connectors"))).toBe(false); // validating creates nothing
  });
});
