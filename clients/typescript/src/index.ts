export {
  createEngramClient,
  EngramClient,
  unwrap,
  type EngramApi,
  type EngramClientOptions,
  type EngramEvent,
  type EventStats,
  type Memory,
  type PageLike,
  type SessionRequest,
  type SessionResponse,
  type TokenSource,
  type ToolEventInput,
} from "./client.js";
export {
  EngramApiError,
  EngramTransportError,
  isEngramApiError,
  retryAfterSeconds,
  type ErrorCode,
} from "./errors.js";
export { DEFAULT_RETRY, repeatable, retryingFetch, type RetryHooks, type RetryPolicy } from "./retry.js";
export type { components, operations, paths } from "./schema.js";
