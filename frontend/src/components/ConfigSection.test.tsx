import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { ConfigSection } from "./ConnectorDetail";

const PLUGIN = "FileSourceConnector";
const info = { name: "src", type: "source", tasks: [], config: { "connector.class": PLUGIN, name: "src", topic: "t", "tasks.max": "1" } };
const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status });

describe("ConfigSection", () => {
  afterEach(() => {
    cleanup();
    vi.unstubAllGlobals();
  });

  it("is read-only for viewers", () => {
    render(<ConfigSection name="src" info={info} writable={false} onSaved={() => {}} />);
    expect(screen.queryByRole("button", { name: "Edit config" })).toBeNull();
    expect((screen.getByLabelText("topic") as HTMLInputElement).readOnly).toBe(true);
  });

  it("on a node without validate, shows the refused update's errors on their fields", async () => {
    const calls: { method: string; url: string }[] = [];
    vi.stubGlobal("fetch", vi.fn(async (url: string, init: RequestInit) => {
      calls.push({ method: init.method ?? "GET", url });
      if (url === "/connectors/src/config" && init.method === "PUT") {
        return json({
          error_code: 400,
          message:
            "Connector configuration is invalid and contains the following 1 error(s):\n" +
            "Invalid value many for configuration tasks.max: Not a number of type INT\n" +
            "You can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`",
        }, 400);
      }
      return json({ error_code: 404, message: `HTTP 404 Not Found: ${url}` }, 404);
    }));
    const saved = vi.fn();
    render(<ConfigSection name="src" info={info} writable onSaved={saved} />);
    fireEvent.click(screen.getByRole("button", { name: "Edit config" }));
    expect((screen.getByLabelText("name") as HTMLInputElement).readOnly).toBe(true);
    fireEvent.change(screen.getByLabelText("tasks.max"), { target: { value: "many" } });
    fireEvent.click(screen.getByRole("button", { name: "Save config" }));
    const error = await screen.findByText(/Invalid value many for configuration tasks.max/);
    expect(error.closest("tr")?.getAttribute("data-key")).toBe("tasks.max");
    expect(saved).not.toHaveBeenCalled();
    expect(calls.map((c) => `${c.method} ${c.url}`)).toContain(`PUT /connector-plugins/${PLUGIN}/config/validate`);
  });
});
