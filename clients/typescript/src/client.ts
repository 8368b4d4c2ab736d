import createClient, { type Client, type Middleware } from "openapi-fetch";

import { apiErrorFrom } from "./errors.js";
import { attemptsOf, DEFAULT_RETRY, type RetryHooks, type RetryPolicy, retryingFetch } from "./retry.js";
import type { components, paths } from "./schema.js";

type Schemas = components["schemas"];
export type Memory = Schemas["MemoryOut"];
export type SessionRequest = Schemas["SessionRequest"];
export type SessionResponse = Schemas["SessionResponse"];
/** One item of `POST /v1/events`: a query the user asked, or a tool call and its outcome. */
export type EngramEvent = Schemas["EventsRequest"]["events"][number];
export type ToolEventInput = Omit<Schemas["ToolEvent"], "kind">;

/** The generated client of every route (`openapi-fetch` over `docs/openapi.json`). */
export type EngramApi = Client<paths>;

export type TokenSource = string | (() => string | Promise<string>);

export interface EngramClientOptions {
  /** The service, e.g. `http://127.0.0.1:8000` (no trailing `/v1`). */
  baseUrl: string;
  /** A bearer token, or a function that returns the current one (called for each request). */
  token: TokenSource;
  /** With a service token: the user of its team it acts for (`x-engram-user`). */
  actAs?: string;
  retry?: Partial<RetryPolicy>;
  /** The `fetch` to send with (default: the global one). */
  fetch?: (request: Request) => Promise<Response>;
  /** Events waiting to be sent; an event emitted past it is dropped (and counted). */
  queueSize?: number;
  /** How long an emitted event waits for others before its batch is sent. */
  flushIntervalMs?: number;
  /** Test hooks of the retry waits. */
  retryHooks?: RetryHooks;
}

/** What became of the events emitted so far. */
export interface EventStats {
  /** Accepted by the service. */
  sent: number;
  /** Refused, or still failing when the retries ran out. */
  failed: number;
  /** Thrown away because the queue was full. */
  dropped: number;
  /** Still waiting to be sent. */
  pending: number;
}

/** The parts of a page `flushOnPageHide` listens to (a browser's `document` and `window`). */
export interface PageLike {
  document?: (EventTarget & { visibilityState?: string }) | undefined;
  window?: EventTarget | undefined;
}

const MAX_EVENTS_PER_BATCH = 100;
/** Browsers cap the bodies of all `keepalive` requests in flight at 64 KiB together. */
const KEEPALIVE_BUDGET_BYTES = 60 * 1024;

/** The data of an `openapi-fetch` answer, or the API's error as an `EngramApiError`. */
export async function unwrap<D>(
  call: Promise<{ data?: D; error?: unknown; response: Response }>,
): Promise<D> {
  const { data, error, response } = await call;
  if (response.ok) return data as D;
  throw apiErrorFrom(response, error, attemptsOf.get(response) ?? 1);
}

/**
 * The Engram client for browsers and Node: `api` is the generated client of every route, with
 * the token, an `Idempotency-Key` on every request but a read (the same one on its retries),
 * and retries that honour `Retry-After`. Around it, a thin layer: the session-start prompt,
 * and fire-and-forget events sent in batches and flushed with `keepalive` when the page hides.
 */
export class EngramClient {
  readonly api: EngramApi;
  private readonly queue: EngramEvent[] = [];
  private readonly queueSize: number;
  private readonly flushIntervalMs: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private inFlight: Promise<void> = Promise.resolve();
  private readonly counts = { sent: 0, failed: 0, dropped: 0 };

  constructor(options: EngramClientOptions) {
    const send = options.fetch ?? ((request: Request) => globalThis.fetch(request));
    const policy = { ...DEFAULT_RETRY, ...options.retry };
    this.queueSize = options.queueSize ?? 1000;
    this.flushIntervalMs = options.flushIntervalMs ?? 1000;
    this.api = createClient<paths>({
      baseUrl: options.baseUrl.replace(/\/+$/, ""),
      fetch: retryingFetch(send, policy, options.retryHooks),
    });
    this.api.use(identity(options.token, options.actAs));
  }

  // --- sessions ------------------------------------------------------------------------------
  /** `POST /v1/sessions`: the facts and memories for this conversation, and its `prompt`. */
  startSession(body: SessionRequest = {}): Promise<SessionResponse> {
    return unwrap(this.api.POST("/v1/sessions", { body }));
  }

  /** Your system prompt with the session's memory section after it (as it is, when Engram has
   * nothing to add). */
  async systemPrompt(basePrompt: string, body: SessionRequest = {}): Promise<string> {
    const session = await this.startSession(body);
    return session.prompt ? `${basePrompt}\n\n${session.prompt}` : basePrompt;
  }

  // --- events ----------------------------------------------------------------------------------
  /** Queue an event; never blocks, never throws. It is sent with others within
   * `flushIntervalMs`, or at once when a batch is full. */
  emit(event: EngramEvent): void {
    if (this.queue.length >= this.queueSize) {
      this.counts.dropped += 1;
      return;
    }
    this.queue.push(event);
    if (this.queue.length >= MAX_EVENTS_PER_BATCH) {
      void this.flush();
    } else if (this.timer === undefined) {
      this.timer = setTimeout(() => void this.flush(), this.flushIntervalMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  emitQuery(text: string): void {
    this.emit({ kind: "query", text });
  }

  emitTool(tool: ToolEventInput): void {
    this.emit({ kind: "tool", ...tool });
  }

  get eventStats(): EventStats {
    return { ...this.counts, pending: this.queue.length };
  }

  /**
   * Send every queued event now, in batches of up to 100, each with its own `Idempotency-Key`
   * (kept on its retries). `keepalive` lets the requests outlive the page: batches then also
   * stay within the browser's 64 KiB budget. Resolves when each batch was sent or gave up.
   */
  flush(options: { keepalive?: boolean } = {}): Promise<EventStats> {
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
    const batches: EngramEvent[][] = [];
    while (this.queue.length > 0) {
      batches.push(this.takeBatch(options.keepalive === true));
    }
    const previous = this.inFlight;
    const sending = Promise.all(batches.map((batch) => this.sendBatch(batch, options.keepalive)));
    this.inFlight = Promise.all([previous, sending]).then(() => undefined);
    return this.inFlight.then(() => this.eventStats);
  }

  /**
   * Flush with `keepalive` when the page is hidden (`visibilitychange` to hidden) or unloaded
   * (`pagehide`). `sendBeacon` cannot carry an `Authorization` header, so this uses `fetch`.
   * Returns a function that removes the listeners.
   */
  flushOnPageHide(page: PageLike = defaultPage()): () => void {
    const onVisibility = (): void => {
      if (page.document?.visibilityState === "hidden") void this.flush({ keepalive: true });
    };
    const onPageHide = (): void => void this.flush({ keepalive: true });
    page.document?.addEventListener("visibilitychange", onVisibility);
    page.window?.addEventListener("pagehide", onPageHide);
    return () => {
      page.document?.removeEventListener("visibilitychange", onVisibility);
      page.window?.removeEventListener("pagehide", onPageHide);
    };
  }

  /** Flush and wait for everything in flight. */
  async close(): Promise<EventStats> {
    return this.flush();
  }

  private takeBatch(keepalive: boolean): EngramEvent[] {
    const batch: EngramEvent[] = [];
    let bytes = 16;
    while (this.queue.length > 0 && batch.length < MAX_EVENTS_PER_BATCH) {
      const size = new TextEncoder().encode(JSON.stringify(this.queue[0])).length + 1;
      if (keepalive && batch.length > 0 && bytes + size > KEEPALIVE_BUDGET_BYTES) break;
      batch.push(this.queue.shift() as EngramEvent);
      bytes += size;
    }
    return batch;
  }

  private async sendBatch(events: EngramEvent[], keepalive?: boolean): Promise<void> {
    try {
      const { response } = await this.api.POST("/v1/events", {
        body: { events },
        ...(keepalive ? { keepalive: true } : {}),
      });
      if (response.ok) this.counts.sent += events.length;
      else this.counts.failed += events.length;
    } catch {
      // unreachable after every retry (EngramTransportError), or the page was torn down
      this.counts.failed += events.length;
    }
  }
}

function identity(token: TokenSource, actAs: string | undefined): Middleware {
  return {
    async onRequest({ request }) {
      const value = typeof token === "function" ? await token() : token;
      request.headers.set("authorization", `Bearer ${value}`);
      if (actAs !== undefined) request.headers.set("x-engram-user", actAs);
      if (request.method !== "GET" && !request.headers.has("idempotency-key")) {
        request.headers.set("idempotency-key", crypto.randomUUID());
      }
      return request;
    },
  };
}

function defaultPage(): PageLike {
  const scope = globalThis as { document?: PageLike["document"]; addEventListener?: unknown };
  return {
    document: scope.document,
    window: typeof scope.addEventListener === "function" ? (globalThis as unknown as EventTarget) : undefined,
  };
}

/** A client of the service at `baseUrl` (see `EngramClientOptions`). */
export function createEngramClient(options: EngramClientOptions): EngramClient {
  return new EngramClient(options);
}
