import { describe, expect, it } from "vitest";
import { ApiError, readCookie, requestHeaders } from "./api";
import { parseRoute } from "./route";
import { canWrite } from "./roles";

describe("requests", () => {
  const cookies = "sessionid=abc; csrftoken=tok%2B1";
  it("send Django's CSRF token on writes only, and always mark themselves as scripts", () => {
    expect(readCookie("csrftoken", cookies)).toBe("tok+1");
    expect(requestHeaders("POST", true, cookies)).toMatchObject({ "X-CSRFToken": "tok+1", "Content-Type": "application/json" });
    expect(requestHeaders("DELETE", false, cookies)["X-CSRFToken"]).toBe("tok+1");
    expect(requestHeaders("GET", false, cookies)["X-CSRFToken"]).toBeUndefined();
    expect(requestHeaders("GET", false, cookies)["X-Requested-With"]).toBe("XMLHttpRequest");
  });

  it("tell a missing endpoint from a missing connector", () => {
    expect(new ApiError(404, "HTTP 404 Not Found: /connectors/x/topics").unsupported).toBe(true);
    expect(new ApiError(405, 'Method "PATCH" not allowed.').unsupported).toBe(true);
    expect(new ApiError(404, "Connector x not found").unsupported).toBe(false);
  });
});

describe("roles and routes", () => {
  it("let operators and admins write, not viewers", () => {
    const u = (roles: string[], is_superuser = false) => ({ username: "u", roles, is_superuser, is_staff: false });
    expect(canWrite(u(["viewer"]))).toBe(false);
    expect(canWrite(u(["operator"]))).toBe(true);
    expect(canWrite(u(["viewer", "admin"]))).toBe(true);
    expect(canWrite(u([], true))).toBe(true);
    expect(canWrite(null)).toBe(false);
  });

  it("parse hash routes, names decoded", () => {
    expect(parseRoute("")).toEqual({ page: "overview" });
    expect(parseRoute("#/connectors")).toEqual({ page: "connectors" });
    expect(parseRoute("#/connectors/a%20b")).toEqual({ page: "connector", name: "a b" });
    expect(parseRoute("#/new")).toEqual({ page: "new" });
  });
});
