import { EngramTransportError, retryAfterSeconds } from "./errors.js";

/** When and how often a request is sent again (the Python client's rules). */
export interface RetryPolicy {
  /** Retries after the first attempt (0: send each request once). */
  maxRetries: number;
  /** Retry `n` (from 0) waits between half and all of `min(maxBackoffS, backoffS * 2 ** n)`. */
  backoffS: number;
  maxBackoffS: number;
  /** No wait is started that would end later than this after the first attempt. */
  maxElapsedS: number;
}

export const DEFAULT_RETRY: RetryPolicy = {
  maxRetries: 4,
  backoffS: 0.25,
  maxBackoffS: 8,
  maxElapsedS: 15,
};

/** Routes the service stores once however often they arrive: a request to them that may have
 * reached the service (the connection failed, a 502 or 504) is sent again; any other POST or
 * PATCH is not, since it could be done twice. */
const REPEATABLE_POSTS = new Set(["/v1/events", "/v1/observations", "/v1/sessions"]);

export function repeatable(request: Request): boolean {
  const method = request.method.toUpperCase();
  if (method === "GET" || method === "HEAD" || method === "PUT") return true;
  return method === "POST" && REPEATABLE_POSTS.has(new URL(request.url).pathname);
}

export interface RetryHooks {
  sleep?: (ms: number) => Promise<void>;
  random?: () => number;
  now?: () => number;
}

/** How many times each answer's request was sent (for the errors built from it). */
export const attemptsOf = new WeakMap<Response, number>();

/**
 * A `fetch` that sends a request again after a 429 or a 503 (the service did not act), and —
 * when sending it twice is harmless — after a failed connection, a 502 or a 504. After a
 * `Retry-After` it waits that long plus the backoff, so never earlier than the service asked.
 * The same `Request` (and so the same `Idempotency-Key`) is sent each time.
 */
export function retryingFetch(
  send: (request: Request) => Promise<Response>,
  policy: RetryPolicy = DEFAULT_RETRY,
  hooks: RetryHooks = {},
): (request: Request) => Promise<Response> {
  const sleep = hooks.sleep ?? ((ms: number) => new Promise<void>((r) => setTimeout(r, ms)));
  const random = hooks.random ?? Math.random;
  const now = hooks.now ?? Date.now;
  return async (request: Request): Promise<Response> => {
    const started = now();
    const again = repeatable(request);
    for (let attempt = 0; ; attempt++) {
      let response: Response | undefined;
      let failure: unknown;
      try {
        response = await send(request.clone());
      } catch (error) {
        if (request.signal?.aborted) throw error;
        failure = error;
      }
      const status = response?.status;
      const retry =
        response === undefined
          ? again
          : status === 429 || status === 503 || (again && (status === 502 || status === 504));
      let waitMs = 0;
      if (retry) {
        const ceiling = Math.min(policy.maxBackoffS, policy.backoffS * 2 ** attempt);
        waitMs = (ceiling / 2 + (random() * ceiling) / 2) * 1000;
        const asked = response ? retryAfterSeconds(response) : null;
        if (asked !== null) waitMs += asked * 1000;
      }
      const inTime = now() + waitMs - started <= policy.maxElapsedS * 1000;
      if (!retry || attempt >= policy.maxRetries || !inTime) {
        if (response === undefined) {
          throw new EngramTransportError(`could not reach the service: ${String(failure)}`, {
            cause: failure,
            attempts: attempt + 1,
          });
        }
        attemptsOf.set(response, attempt + 1);
        return response;
      }
      await response?.body?.cancel();
      await sleep(waitMs);
    }
  };
}
