/** The client against a real `engram serve` (started by test/engram-serve.ts). */
import { createServer, request as httpRequest, type IncomingMessage, type Server } from "node:http";
import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, inject, test } from "vitest";

import { EngramApiError, EngramClient, isEngramApiError, unwrap, type components } from "../src/index.js";
import { mintToken } from "./engram-serve.js";

const url = inject("engramUrl");
const dataDir = inject("engramDataDir");
const cmd = inject("engramCmd");

const team = `t${randomUUID().slice(0, 8)}`;
let aliceToken = "";
let bobToken = "";

beforeAll(() => {
  aliceToken = mintToken(cmd, dataDir, "alice", team);
  bobToken = mintToken(cmd, dataDir, "bob", team);
});

function client(token: string, baseUrl: string = url): EngramClient {
  return new EngramClient({ baseUrl, token });
}

async function eventually<T>(probe: () => Promise<T | undefined>, timeoutMs = 45_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 250));
  }
}

describe("memories", () => {
  test("save, list (by conversation), recall, and an edit refused for a stale ETag", async () => {
    const alice = client(aliceToken);
    const saved = await alice.api.POST("/v1/memories", {
      body: { key: "preferred language", value: "Portuguese", sourceChannelId: "conv-ts-1" },
    });
    expect(saved.response.status).toBe(201);
    const memory = saved.data!;
    expect(saved.response.headers.get("etag")).toBe(`"${memory.version}"`);
    await unwrap(alice.api.POST("/v1/memories", { body: { key: "editor", value: "vim" } }));
    await unwrap(client(bobToken).api.POST("/v1/memories", { body: { key: "x", value: "bob's", sourceChannelId: "conv-ts-1" } }));

    const listed = await unwrap(
      alice.api.GET("/v1/memories/list", { params: { query: { sourceChannelId: "conv-ts-1" } } }),
    );
    expect(listed.memories.map((m) => m.id)).toEqual([memory.id]);
    expect(listed.nextCursor ?? null).toBeNull();

    const first = await unwrap(alice.api.GET("/v1/memories/list", { params: { query: { limit: 1 } } }));
    expect(first.memories).toHaveLength(1);
    const second = await unwrap(
      alice.api.GET("/v1/memories/list", { params: { query: { limit: 1, cursor: first.nextCursor! } } }),
    );
    expect(new Set([...first.memories, ...second.memories].map((m) => m.key))).toEqual(
      new Set(["preferred language", "editor"]),
    );

    const recalled = await unwrap(alice.api.GET("/v1/memories", { params: { query: { query: "language" } } }));
    expect(recalled.memories.map((m) => m.value)).toContain("Portuguese");

    const etag = `"${memory.version}"`;
    const edited = await alice.api.PATCH("/v1/memories/{id}", {
      params: { path: { id: memory.id }, header: { "If-Match": etag } },
      body: { value: "Brazilian Portuguese" },
    });
    expect(edited.response.status).toBe(200);
    const stale = await unwrap(
      alice.api.PATCH("/v1/memories/{id}", {
        params: { path: { id: memory.id }, header: { "If-Match": etag } },
        body: { value: "Spanish" },
      }),
    ).catch((e: unknown) => e);
    expect(isEngramApiError(stale, "precondition_failed")).toBe(true);
    expect((stale as EngramApiError).status).toBe(412);
    const now = await unwrap(alice.api.GET("/v1/memories/{id}", { params: { path: { id: memory.id } } }));
    expect(now.value).toBe("Brazilian Portuguese");
  });

  test("a merge folds one memory into another, its versions first; another user's is refused", async () => {
    const alice = client(aliceToken);
    const kept = await unwrap(alice.api.POST("/v1/memories", { body: { key: "preferred shell", value: "fish" } }));
    const folded = await unwrap(alice.api.POST("/v1/memories", { body: { key: "shell of choice", value: "fish" } }));
    expect(folded.duplicateOf ?? null).toBeNull(); // no embedder in this service: nothing flagged
    const merged = await unwrap(
      alice.api.POST("/v1/memories/{id}/merge", {
        params: { path: { id: folded.id }, header: { "If-Match": `"${folded.version}"` } },
        body: { into: kept.id },
      }),
    );
    expect([merged.id, merged.version]).toEqual([kept.id, kept.version + 1]);
    const history = await unwrap(
      alice.api.GET("/v1/memories/{id}/history", { params: { path: { id: kept.id } } }),
    );
    expect(history.versions.map((v) => v.key)).toEqual(["shell of choice", "preferred shell"]);
    expect(history.pendingChange ?? null).toBeNull();
    const bobs = await unwrap(client(bobToken).api.POST("/v1/memories", { body: { key: "shell", value: "fish" } }));
    const refused = await unwrap(
      alice.api.POST("/v1/memories/{id}/merge", { params: { path: { id: kept.id } }, body: { into: bobs.id } }),
    ).catch((e: unknown) => e);
    expect(isEngramApiError(refused, "invalid_input")).toBe(true);
    expect((refused as EngramApiError).status).toBe(422);
  });

  test("errors are typed by the API's codes", async () => {
    const error = await unwrap(
      client(aliceToken).api.GET("/v1/memories/{id}", { params: { path: { id: randomUUID() } } }),
    ).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(EngramApiError);
    expect((error as EngramApiError).code).toBe("not_found");
    const unauthorized = await unwrap(client("not-a-token").api.GET("/v1/facts")).catch((e: unknown) => e);
    expect(isEngramApiError(unauthorized, "unauthorized")).toBe(true);
  });
});

describe("sessions and events", () => {
  test("the session prompt carries what was saved", async () => {
    const carol = client(mintToken(cmd, dataDir, "carol", team));
    await unwrap(carol.api.POST("/v1/memories", { body: { key: "favourite city", value: "Lisbon" } }));
    const prompt = await carol.systemPrompt("You are a helpful assistant.");
    expect(prompt.startsWith("You are a helpful assistant.\n\n")).toBe(true);
    expect(prompt).toContain("Lisbon");
  });

  test("events emitted and flushed as the page hides reach the service", async () => {
    const dave = mintToken(cmd, dataDir, "dave", team);
    const sent: Request[] = [];
    const engram = new EngramClient({
      baseUrl: url,
      token: dave,
      flushIntervalMs: 60_000, // only the page hiding sends them
      fetch: (request) => {
        sent.push(request);
        return fetch(request);
      },
    });
    const document = Object.assign(new EventTarget(), { visibilityState: "visible" });
    const window = new EventTarget();
    engram.flushOnPageHide({ document, window });
    for (let i = 0; i < 3; i++) engram.emitQuery("show my royalties");
    expect(sent).toHaveLength(0);
    window.dispatchEvent(new Event("pagehide"));
    const stats = await engram.close();
    expect(stats).toEqual({ sent: 3, failed: 0, dropped: 0, pending: 0 });
    expect(sent.map((r) => [new URL(r.url).pathname, r.keepalive])).toEqual([["/v1/events", true]]);

    const fact = await eventually(async () => {
      const session = await client(dave).startSession({});
      return session.facts.find((f) => f.subject === "domain_preference:royalty");
    });
    expect(fact.reinforcementCount).toBeGreaterThanOrEqual(1);
  });

  test("past the ingest rate limit the service answers 429 rate_limited with its Retry-After", async () => {
    const erin = client(mintToken(cmd, dataDir, "erin", team));
    // the limit counts observations (200 a minute here): the third hundred is refused whole
    const observations: components["schemas"]["ObservationIn"][] = Array.from({ length: 100 }, (_, i) => ({
      type: "query_pattern" as const,
      content: `royalties ${i}`,
      metadata: { domain: "royalty", query: `royalties ${i}` },
    }));
    const post = () => unwrap(erin.api.POST("/v1/observations", { body: { observations } }));
    await post();
    await post();
    const refused = await post().catch((e: unknown) => e);
    expect(isEngramApiError(refused, "rate_limited")).toBe(true);
    const error = refused as EngramApiError;
    // the wait is about a minute: longer than the client's budget, so it is not retried
    expect(error.retryAfterS).toBeGreaterThan(15);
    expect(error.attempts).toBe(1);
  });
});

describe("a 429 on the way", () => {
  let proxy: Server;
  let proxyUrl = "";
  const arrivals: { at: number; key: string | undefined; status: number }[] = [];

  beforeAll(async () => {
    // forwards to engram serve, but answers the first POST /v1/events with the service's 429
    const target = new URL(url);
    let refused = 0;
    proxy = createServer((req: IncomingMessage, res) => {
      const key = req.headers["idempotency-key"] as string | undefined;
      if (req.method === "POST" && req.url === "/v1/events" && refused === 0) {
        refused += 1;
        arrivals.push({ at: Date.now(), key, status: 429 });
        req.resume();
        res.writeHead(429, { "content-type": "application/json", "retry-after": "1" });
        res.end(JSON.stringify({ error: { code: "rate_limited", message: "too many requests" } }));
        return;
      }
      const upstream = httpRequest(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (answer) => {
          arrivals.push({ at: Date.now(), key, status: answer.statusCode ?? 0 });
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      req.pipe(upstream);
    });
    await new Promise<void>((r) => proxy.listen(0, "127.0.0.1", () => r()));
    const address = proxy.address();
    proxyUrl = `http://127.0.0.1:${typeof address === "object" && address ? address.port : 0}`;
  });

  afterAll(() => new Promise<void>((r) => proxy.close(() => r())));

  test("is retried after its Retry-After, with the same Idempotency-Key, and stored", async () => {
    const frank = mintToken(cmd, dataDir, "frank", team);
    const engram = client(frank, proxyUrl);
    const accepted = await unwrap(
      engram.api.POST("/v1/events", { body: { events: [{ kind: "query", text: "show my royalties" }] } }),
    );
    expect(accepted.accepted).toBe(1);
    expect(arrivals.map((a) => a.status)).toEqual([429, 202]);
    expect(arrivals[1]!.at - arrivals[0]!.at).toBeGreaterThanOrEqual(1000);
    expect(arrivals[1]!.key).toBe(arrivals[0]!.key);
    const fact = await eventually(async () => {
      const session = await client(frank).startSession({});
      return session.facts.find((f) => f.subject === "domain_preference:royalty");
    });
    expect(fact.reinforcementCount).toBe(1);
  });
});
