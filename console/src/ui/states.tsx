import type { ComponentChildren } from "preact";
import { useCallback, useEffect, useRef, useState } from "preact/hooks";

import { describeError, type Problem } from "../api";
import { useSession } from "../session";

export function Loading({ what }: { what: string }) {
  return (
    <p role="status" class="muted loading">
      Loading {what}…
    </p>
  );
}

export function Empty({ children }: { children: ComponentChildren }) {
  return <p class="empty">{children}</p>;
}

/** An error, said plainly, with what the person can do: try again (after the wait a 429 asked
 * for), reload after a conflict, or sign in again. */
export function ErrorNotice({ error, onRetry, retryLabel = "Try again" }: {
  error: unknown;
  onRetry?: () => void;
  retryLabel?: string;
}) {
  const info: Problem = describeError(error);
  const session = useSession();
  const [wait, setWait] = useState(info.retryAfterS ?? 0);
  useEffect(() => {
    setWait(info.retryAfterS ?? 0);
  }, [error]);
  useEffect(() => {
    if (wait <= 0) return;
    const timer = setTimeout(() => setWait(wait - 1), 1000);
    return () => clearTimeout(timer);
  }, [wait]);
  return (
    <div role="alert" class="notice error">
      <p>
        <strong>{info.title}.</strong> {info.detail}
      </p>
      {info.signIn ? (
        <button type="button" onClick={() => session.signInAgain()}>
          Sign in again
        </button>
      ) : (
        onRetry && (
          <button type="button" onClick={onRetry} disabled={wait > 0}>
            {wait > 0 ? `${retryLabel} (in ${wait} s)` : info.conflict ? "Reload" : retryLabel}
          </button>
        )
      )}
    </div>
  );
}

export type Loaded<T> =
  | { state: "loading"; data: T | null; error: null }
  | { state: "ready"; data: T; error: null }
  | { state: "error"; data: T | null; error: unknown };

/** Loads `fetcher()` now and on `reload()`; keeps the last data while it reloads. */
export function useLoad<T>(fetcher: () => Promise<T>, deps: unknown[]): Loaded<T> & { reload: () => void } {
  const [result, setResult] = useState<Loaded<T>>({ state: "loading", data: null, error: null });
  const generation = useRef(0);
  const run = useCallback(() => {
    const mine = ++generation.current;
    setResult((previous) => ({ state: "loading", data: previous.data, error: null }));
    fetcher().then(
      (data) => {
        if (mine === generation.current) setResult({ state: "ready", data, error: null });
      },
      (error: unknown) => {
        if (mine === generation.current) setResult((previous) => ({ state: "error", data: previous.data, error }));
      },
    );
  }, deps);
  useEffect(run, [run]);
  return { ...result, reload: run };
}

/** A short-lived message after an action ("Deleted."), read out by screen readers. */
export function useFlash(): [string | null, (message: string) => void] {
  const [message, setMessage] = useState<string | null>(null);
  const timer = useRef<ReturnType<typeof setTimeout> | undefined>(undefined);
  const show = useCallback((text: string) => {
    setMessage(text);
    clearTimeout(timer.current);
    timer.current = setTimeout(() => setMessage(null), 6000);
  }, []);
  return [message, show];
}

export function Flash({ message }: { message: string | null }) {
  return (
    <p role="status" class="flash" aria-live="polite">
      {message ?? ""}
    </p>
  );
}
