import { EngramApiError, EngramClient, EngramTransportError } from "@engram/client";

import type { Auth } from "./auth/types";
import { SignInRequired } from "./auth/tokens";
import type { ConsoleConfig } from "./config";

export type { Memory } from "@engram/client";
export { unwrap } from "@engram/client";

/** The header that tells the API which surface a write came through: the versions a
 * memory records then say "console". */
export const SURFACE_HEADER = "X-Engram-Surface";

/**
 * The client the pages use: the current ID token and `X-Engram-Surface: console` on every
 * request, few retries (a person is waiting, and the page says what happened instead), and a
 * 401 ends the session here.
 */
export function createApi(config: ConsoleConfig, auth: Auth, onUnauthorized: () => void): EngramClient {
  const baseUrl = config.apiUrl || window.location.origin;
  const client = new EngramClient({
    baseUrl,
    token: () => auth.idToken(),
    retry: { maxRetries: 2, maxElapsedS: 4 },
    fetch: async (request: Request) => {
      const response = await fetch(request);
      if (response.status === 401) onUnauthorized();
      return response;
    },
  });
  client.api.use({
    onRequest({ request }) {
      request.headers.set(SURFACE_HEADER, "console");
      return request;
    },
  });
  return client;
}

/** What went wrong, in words a person understands, and what they can do about it. */
export interface Problem {
  title: string;
  detail: string;
  /** Seconds to wait before trying again (429's Retry-After). */
  retryAfterS: number | null;
  /** The session is over: the page offers to sign in again. */
  signIn: boolean;
  /** Someone else changed or decided the same thing: the page offers to reload it. */
  conflict: boolean;
}

function problem(title: string, detail: string, extra: Partial<Problem> = {}): Problem {
  return { title, detail, retryAfterS: null, signIn: false, conflict: false, ...extra };
}

export function describeError(error: unknown): Problem {
  if (error instanceof SignInRequired) return problem("Sign in again", error.message, { signIn: true });
  if (error instanceof EngramTransportError) {
    return problem("Engram cannot be reached", "Check your connection, then try again. Nothing was changed.");
  }
  if (!(error instanceof EngramApiError)) {
    return problem("Something went wrong", error instanceof Error ? error.message : String(error));
  }
  switch (error.code) {
    case "unauthorized":
      return problem("Sign in again", "Your sign-in has expired or was not accepted.", { signIn: true });
    case "forbidden":
      return problem("Not allowed", "Your account may not do this. Ask an admin if you need it.");
    case "memory_disabled":
      return problem("Memory is switched off", "An admin has switched memory off for your team or this persona.");
    case "not_found":
      return problem("It is no longer there", "Someone may have deleted it meanwhile. Reload to see what is there now.", {
        conflict: true,
      });
    case "conflict":
      return problem(
        "Conflict: someone else got there first",
        "Another admin has already decided or changed this. Nothing of yours was saved. Reload to see its current state.",
        { conflict: true },
      );
    case "precondition_failed":
      return problem(
        "Conflict: it changed since you opened it",
        "Someone else edited this memory after you read it, so your change was not saved. Reload to see their version, then edit again.",
        { conflict: true },
      );
    case "rate_limited": {
      const wait = error.retryAfterS === null ? null : Math.max(1, Math.ceil(error.retryAfterS));
      return problem(
        "Too many requests",
        wait === null ? "Wait a moment, then try again." : `Wait ${wait} second${wait === 1 ? "" : "s"}, then try again.`,
        { retryAfterS: wait },
      );
    }
    case "quota_exceeded":
      return problem("Memory is full", "The memory quota is reached. Delete or archive memories to make room.");
    case "unavailable":
      return problem(
        "Engram is degraded",
        "It could not do this just now (503). Nothing was lost or done twice; try again in a moment.",
      );
    case "invalid_input":
    case "invalid_json":
    case "bad_request":
      return problem("Please check what you entered", error.message);
    default:
      return problem(
        error.status >= 500 ? "Engram had a problem" : "The request was refused",
        `${error.message} (HTTP ${error.status})`,
      );
  }
}
