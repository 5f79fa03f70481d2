import { cleanup, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { ConnectorActions } from "./ConnectorActions";

const noop = () => {};

describe("ConnectorActions", () => {
  let fetchMock: ReturnType<typeof vi.fn>;
  beforeEach(() => {
    fetchMock = vi.fn(async () => new Response(null, { status: 202 }));
    vi.stubGlobal("fetch", fetchMock);
    document.cookie = "csrftoken=tok";
  });
  afterEach(() => {
    cleanup();
    vi.unstubAllGlobals();
  });

  it("shows a viewer no write buttons", () => {
    render(<ConnectorActions name="c" state="RUNNING" writable={false} onDone={noop} onError={noop} onDeleted={noop} />);
    expect(screen.queryAllByRole("button")).toHaveLength(0);
  });

  it("pauses a running connector with the CSRF token, and offers resume when paused", async () => {
    const done = vi.fn();
    const { rerender } = render(
      <ConnectorActions name="a b" state="RUNNING" writable onDone={done} onError={noop} onDeleted={noop} />,
    );
    fireEvent.click(screen.getByRole("button", { name: "Pause" }));
    await vi.waitFor(() => expect(done).toHaveBeenCalled(), { timeout: 15000 });
    const [url, init] = fetchMock.mock.calls[0] as [string, RequestInit];
    expect(url).toBe("/connectors/a%20b/pause");
    expect(init.method).toBe("PUT");
    expect((init.headers as Record<string, string>)["X-CSRFToken"]).toBe("tok");
    rerender(<ConnectorActions name="a b" state="PAUSED" writable onDone={done} onError={noop} onDeleted={noop} />);
    expect(screen.getByRole("button", { name: "Resume" })).toBeTruthy();
  });

  it("deletes only after confirmation", async () => {
    const deleted = vi.fn();
    render(<ConnectorActions name="c" state="RUNNING" writable onDone={noop} onError={noop} onDeleted={deleted} />);
    fireEvent.click(screen.getByRole("button", { name: "Delete" }));
    expect(fetchMock).not.toHaveBeenCalled();
    fireEvent.click(screen.getByRole("button", { name: "Cancel" }));
    expect(screen.queryByRole("dialog")).toBeNull();
    fireEvent.click(screen.getByRole("button", { name: "Delete" }));
    const dialog = screen.getByRole("dialog");
    fireEvent.click(dialog.querySelector("button.danger")!);
    await vi.waitFor(() => expect(deleted).toHaveBeenCalled(), { timeout: 15000 });
    expect(fetchMock.mock.calls[0][0]).toBe("/connectors/c");
    expect((fetchMock.mock.calls[0][1] as RequestInit).method).toBe("DELETE");
  });

  it("restarts with the chosen includeTasks and onlyFailed, and reports a missing endpoint", async () => {
    fetchMock.mockImplementation(
      async () => new Response(JSON.stringify({ error_code: 404, message: "HTTP 404 Not Found: /connectors/c/restart" }), { status: 404 }),
    );
    const error = vi.fn();
    render(<ConnectorActions name="c" state="FAILED" writable onDone={noop} onError={error} onDeleted={noop} />);
    fireEvent.click(screen.getByRole("button", { name: "Restart…" }));
    fireEvent.click(screen.getByLabelText(/only failed/));
    fireEvent.click(screen.getByRole("button", { name: "Restart" }));
    await vi.waitFor(() => expect(error).toHaveBeenCalled(), { timeout: 15000 });
    expect(fetchMock.mock.calls[0][0]).toBe("/connectors/c/restart?includeTasks=true&onlyFailed=true");
    expect(error.mock.calls[0][0]).toMatch(/not available on this node/);
  });
});
