import type { components } from "./schema.js";

/** Every `error.code` the API answers with (the OpenAPI error schema's enum). */
export type ErrorCode = components["schemas"]["ErrorDetail"]["code"];

/** An error answer of the API: its status, its code and, for a 429, how long to wait. */
export class EngramApiError extends Error {
  readonly status: number;
  readonly code: ErrorCode;
  readonly details: unknown;
  /** Seconds from the `Retry-After` header, when the answer had one. */
  readonly retryAfterS: number | null;
  /** How many times the request was sent (retries included). */
  readonly attempts: number;

  constructor(init: {
    status: number;
    code: ErrorCode;
    message: string;
    details?: unknown;
    retryAfterS?: number | null;
    attempts?: number;
  }) {
    super(init.message);
    this.name = "EngramApiError";
    this.status = init.status;
    this.code = init.code;
    this.details = init.details ?? null;
    this.retryAfterS = init.retryAfterS ?? null;
    this.attempts = init.attempts ?? 1;
  }

  /** Whether this is the error `code` (a type guard for the code). */
  is<C extends ErrorCode>(code: C): this is EngramApiError & { code: C } {
    return this.code === code;
  }
}

/** The service could not be reached, or the connection failed before an answer came. */
export class EngramTransportError extends Error {
  readonly attempts: number;

  constructor(message: string, options: { cause: unknown; attempts: number }) {
    super(message, { cause: options.cause });
    this.name = "EngramTransportError";
    this.attempts = options.attempts;
  }
}

/** Whether `error` is an API error, optionally of one `code`. */
export function isEngramApiError<C extends ErrorCode>(
  error: unknown,
  code?: C,
): error is EngramApiError & { code: C } {
  return error instanceof EngramApiError && (code === undefined || error.code === code);
}

/** `Retry-After` in seconds (a number of seconds or an HTTP date); `null` when absent. */
export function retryAfterSeconds(response: Response, now: number = Date.now()): number | null {
  const raw = response.headers.get("retry-after");
  if (raw === null || raw.trim() === "") return null;
  if (/^\d+$/.test(raw.trim())) return Number(raw.trim());
  const at = Date.parse(raw);
  return Number.isNaN(at) ? null : Math.max(0, (at - now) / 1000);
}

/** The `EngramApiError` of an error answer; its body is read if it is the API's JSON shape. */
export function apiErrorFrom(response: Response, body: unknown, attempts: number): EngramApiError {
  const detail =
    body && typeof body === "object" && "error" in body
      ? (body as { error: { code?: unknown; message?: unknown; details?: unknown } }).error
      : undefined;
  const code = typeof detail?.code === "string" ? (detail.code as ErrorCode) : fallbackCode(response.status);
  const message =
    typeof detail?.message === "string" ? detail.message : `HTTP ${response.status} ${response.statusText}`;
  return new EngramApiError({
    status: response.status,
    code,
    message,
    details: detail?.details ?? null,
    retryAfterS: retryAfterSeconds(response),
    attempts,
  });
}

/** The code of an answer without the API's error body (a gateway or a proxy answered). */
function fallbackCode(status: number): ErrorCode {
  if (status === 401) return "unauthorized";
  if (status === 403) return "forbidden";
  if (status === 404) return "not_found";
  if (status === 429) return "rate_limited";
  if (status === 503 || status === 502 || status === 504) return "unavailable";
  return status >= 500 ? "internal" : "bad_request";
}
