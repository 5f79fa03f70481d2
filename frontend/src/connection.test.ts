import { afterEach, describe, expect, it, vi } from "vitest";
import { api, ApiError, describe as describeError } from "./api";
import { Connection, connection, findLiveNode } from "./connection";

afterEach(() => {
  vi.unstubAllGlobals();
  connection.ok();
});

describe("the connection to the node", () => {
  it("is lost on a network failure, with a sentence naming the node instead of the raw TypeError", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => {
      throw new TypeError("Failed to fetch");
    }));
    const err = (await api("GET", "/connectors").catch((e: unknown) => e)) as ApiError;
    expect(err).toBeInstanceOf(ApiError);
    expect(err.status).toBe(0);
    expect(describeError(err)).toContain(window.location.host);
    expect(describeError(err)).not.toContain("TypeError");
    expect(connection.snapshot.lostSince).not.toBeNull();

    vi.stubGlobal("fetch", vi.fn(async () => new Response("[]", { status: 200 })));
    await api("GET", "/connectors");
    expect(connection.snapshot.lostSince).toBeNull();
    expect(connection.snapshot.lastOk).not.toBeNull();
  });

  it("counts any HTTP answer as the node being there", async () => {
    vi.stubGlobal("fetch", vi.fn(async () => new Response('{"error_code":503,"message":"starting"}', { status: 503 })));
    await expect(api("GET", "/connectors")).rejects.toMatchObject({ status: 503 });
    expect(connection.snapshot.lostSince).toBeNull();
  });

  it("keeps the first failure's time for the whole outage and knows the other nodes", () => {
    let now = 1000;
    const c = new Connection(() => now);
    c.failed("gone");
    now = 5000;
    c.failed("still gone");
    expect(c.snapshot).toMatchObject({ lostSince: 1000, lostReason: "gone" });
    // the cluster view comes from the leader (n2): this console's node is the one at the page's host
    c.learn(
      [
        { id: "n1", rest_address: "127.0.0.1:8083" },
        { id: "n2", rest_address: "127.0.0.1:8084" },
        { id: "n3", rest_address: null },
      ],
      "127.0.0.1:8083",
    );
    expect(c.snapshot.selfId).toBe("n1");
    expect(c.others().map((n) => n.id)).toEqual(["n2"]);
  });

  it("fails over to the first other node that answers", async () => {
    const probe = vi.fn(async (url: string) => {
      if (url.includes(":8084")) throw new TypeError("Failed to fetch");
      return new Response(null);
    });
    const found = await findLiveNode(
      [
        { id: "n2", rest_address: "127.0.0.1:8084" },
        { id: "n3", rest_address: "127.0.0.1:8085" },
      ],
      probe,
    );
    expect(found?.id).toBe("n3");
    expect(probe.mock.calls.map((c) => c[0])).toEqual(["http://127.0.0.1:8084/health", "http://127.0.0.1:8085/health"]);
    expect(await findLiveNode([], probe)).toBeNull();
  });
});
