/** The retry rules, with a scripted `fetch` and recorded waits (no service needed). */
import { describe, expect, test } from "vitest";

import { EngramApiError, EngramClient, EngramTransportError, unwrap } from "../src/index.js";

type Step = number | "network";

function scripted(steps: Step[], headers: Record<string, string> = {}) {
  const seen: Request[] = [];
  const fetch = async (request: Request): Promise<Response> => {
    seen.push(request);
    const step = steps.shift() ?? 200;
    if (step === "network") throw new TypeError("fetch failed");
    const body =
      step >= 400
        ? { error: { code: step === 429 ? "rate_limited" : "unavailable", message: `status ${step}` } }
        : { accepted: 1, ids: ["x"] };
    return new Response(JSON.stringify(body), {
      status: step,
      headers: { "content-type": "application/json", ...(step === 429 ? headers : {}) },
    });
  };
  return { fetch, seen };
}

function client(fetch: (r: Request) => Promise<Response>, waits: number[]) {
  return new EngramClient({
    baseUrl: "http://engram.test",
    token: () => "tok",
    fetch,
    retryHooks: { sleep: async (ms) => void waits.push(ms), random: () => 1 },
  });
}

describe("retries", () => {
  test("a 429 is sent again after its Retry-After, with the same Idempotency-Key", async () => {
    const { fetch, seen } = scripted([429, 202], { "retry-after": "3" });
    const waits: number[] = [];
    const engram = client(fetch, waits);
    const data = await unwrap(engram.api.POST("/v1/events", { body: { events: [{ kind: "query", text: "hi" }] } }));
    expect(data.accepted).toBe(1);
    expect(seen).toHaveLength(2);
    expect(waits).toHaveLength(1);
    expect(waits[0]).toBeGreaterThanOrEqual(3000); // never earlier than the service asked
    const keys = seen.map((r) => r.headers.get("idempotency-key"));
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);
    expect(keys[1]).toBe(keys[0]);
    expect(seen.every((r) => r.headers.get("authorization") === "Bearer tok")).toBe(true);
  });

  test("a save is not sent twice after a failed connection: it may have been stored", async () => {
    const { fetch, seen } = scripted(["network"]);
    const engram = client(fetch, []);
    const error = await unwrap(engram.api.POST("/v1/memories", { body: { key: "k", value: "v" } })).catch(
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(EngramTransportError);
    expect((error as EngramTransportError).attempts).toBe(1);
    expect(seen).toHaveLength(1);
  });

  test("a read is sent again after a failed connection", async () => {
    const { fetch, seen } = scripted(["network", 200]);
    const engram = client(fetch, []);
    await unwrap(engram.api.GET("/v1/facts"));
    expect(seen).toHaveLength(2);
    expect(seen[0]?.headers.has("idempotency-key")).toBe(false);
  });

  test("a 503 that does not clear is an error typed by its code, after every retry", async () => {
    const { fetch, seen } = scripted([503, 503, 503, 503, 503, 503]);
    const waits: number[] = [];
    const error = await unwrap(client(fetch, waits).api.GET("/v1/facts")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngramApiError);
    const api = error as EngramApiError;
    expect(api.is("unavailable")).toBe(true);
    expect([api.status, api.attempts, seen.length]).toEqual([503, 5, 5]);
    expect(waits).toEqual([250, 500, 1000, 2000]);
  });

  test("no wait is started past the time budget", async () => {
    const { fetch, seen } = scripted([429, 202], { "retry-after": "60" });
    const error = await unwrap(client(fetch, []).api.GET("/v1/facts")).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngramApiError);
    expect((error as EngramApiError).retryAfterS).toBe(60);
    expect(seen).toHaveLength(1);
  });
});

describe("events", () => {
  test("emit never throws; a full queue drops and counts", async () => {
    const { fetch, seen } = scripted([]);
    const engram = new EngramClient({ baseUrl: "http://engram.test", token: "t", fetch, queueSize: 2, flushIntervalMs: 60_000 });
    engram.emitQuery("a");
    engram.emitQuery("b");
    engram.emitQuery("c");
    expect(engram.eventStats).toEqual({ sent: 0, failed: 0, dropped: 1, pending: 2 });
    const stats = await engram.flush();
    expect(stats).toEqual({ sent: 2, failed: 0, dropped: 1, pending: 0 });
    expect(seen).toHaveLength(1);
  });

  test("a hidden page flushes with keepalive, in batches within the keepalive budget", async () => {
    const { fetch, seen } = scripted([]);
    const engram = new EngramClient({ baseUrl: "http://engram.test", token: "t", fetch, flushIntervalMs: 60_000 });
    const document = Object.assign(new EventTarget(), { visibilityState: "visible" });
    const remove = engram.flushOnPageHide({ document, window: new EventTarget() });
    for (let i = 0; i < 90; i++) engram.emitQuery("x".repeat(900));
    document.dispatchEvent(new Event("visibilitychange")); // still visible: nothing sent
    expect(seen).toHaveLength(0);
    document.visibilityState = "hidden";
    document.dispatchEvent(new Event("visibilitychange"));
    const stats = await engram.close();
    expect(stats.sent).toBe(90);
    expect(seen.length).toBeGreaterThan(1); // 90 x ~930 bytes do not fit one 64 KiB budget
    for (const request of seen) {
      expect(request.keepalive).toBe(true);
      expect((await request.clone().arrayBuffer()).byteLength).toBeLessThanOrEqual(60 * 1024);
    }
    remove();
  });
});
