// The console's only way to the cluster: the node's public REST API, same origin, Django session + CSRF.
import { connection, unreachableMessage } from "./connection";

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
    public body?: unknown,
  ) {
    super(message);
  }

  /** The node does not have this endpoint (yet): no route (404 "HTTP 404 Not Found: ...") or no such method. */
  get unsupported(): boolean {
    return this.status === 405 || this.status === 501 || (this.status === 404 && this.message.startsWith("HTTP 404"));
  }
}

let onUnauthorized: () => void = () => {};

/** Called whenever a request answers 401 (session expired or never logged in). */
export function setUnauthorizedHandler(fn: () => void): void {
  onUnauthorized = fn;
}

export function readCookie(name: string, cookies: string = document.cookie): string | null {
  for (const part of cookies.split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === name) return decodeURIComponent(v.join("="));
  }
  return null;
}

const SAFE = new Set(["GET", "HEAD", "OPTIONS"]);

/** Headers of one request: XHR marker (no browser password dialog on 401) and Django's CSRF token on writes. */
export function requestHeaders(method: string, hasBody: boolean, cookies: string = document.cookie): Record<string, string> {
  const headers: Record<string, string> = { Accept: "application/json", "X-Requested-With": "XMLHttpRequest" };
  if (hasBody) headers["Content-Type"] = "application/json";
  if (!SAFE.has(method.toUpperCase())) {
    const token = readCookie("csrftoken", cookies);
    if (token) headers["X-CSRFToken"] = token;
  }
  return headers;
}

/** One REST call; resolves to the decoded body (null when empty), rejects with ApiError (Connect's error body). */
export async function api<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  let resp: Response;
  try {
    resp = await fetch(path, {
      method,
      headers: requestHeaders(method, body !== undefined),
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: "same-origin",
    });
  } catch (err) {
    const message = unreachableMessage(window.location.host, err);
    connection.failed(message);
    throw new ApiError(0, message);
  }
  connection.ok();
  const text = await resp.text();
  let data: unknown = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = text;
    }
  }
  if (!resp.ok) {
    const message =
      data && typeof data === "object" && "message" in data ? String((data as { message: unknown }).message) : `HTTP ${resp.status}`;
    if (resp.status === 401 && path !== "/raftconnect/v1/session") onUnauthorized();
    throw new ApiError(resp.status, message, data);
  }
  return data as T;
}

export const enc = encodeURIComponent;

/** A user-facing sentence for an error from api(). */
export function describe(err: unknown, what = "This action"): string {
  if (err instanceof ApiError) {
    if (err.status === 0) return err.message; // the node is gone: api() already says which
    if (err.unsupported) return `${what} is not available on this node (HTTP ${err.status}).`;
    return `${err.message} (HTTP ${err.status})`;
  }
  // a fetch that never reached the node (it died meanwhile): say so, never the raw "TypeError: Failed to fetch"
  if (err instanceof TypeError || (err instanceof Error && /failed to fetch|networkerror|load failed/i.test(err.message))) {
    return `The node at ${window.location.host} does not answer (connection lost)`;
  }
  return String(err);
}
