import { EngramApiError, type ErrorCode } from "@engram/client";
import type { ComponentChildren, RefObject } from "preact";
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

/** What an API error code means for one action: its detail, or its title and detail. */
export type Meaning = string | { title: string; detail: string };

/** An error, said plainly, with what the person can do: try again (after the wait a 429 asked
 * for), reload after a conflict, or sign in again. `details` says, for some API error codes,
 * what they mean for this action instead of what they usually mean. */
export function ErrorNotice({ error, onRetry, retryLabel = "Try again", details }: {
  error: unknown;
  onRetry?: () => void;
  retryLabel?: string;
  details?: Partial<Record<ErrorCode, Meaning>>;
}) {
  const described: Problem = describeError(error);
  const specific = error instanceof EngramApiError ? details?.[error.code] : undefined;
  const info: Problem =
    specific === undefined
      ? described
      : typeof specific === "string"
        ? { ...described, detail: specific }
        : { ...described, ...specific };
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

/** What the person started and is waiting for: `act(work)` runs it, `busy` while it runs, and the
 * `error` it failed with (cleared when the next one starts, or by `clearError`). */
export function useAction(): {
  busy: boolean;
  error: unknown;
  act: (work: () => Promise<void>) => Promise<void>;
  clearError: () => void;
} {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const act = async (work: () => Promise<void>) => {
    setBusy(true);
    setError(null);
    try {
      await work();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return { busy, error, act, clearError: () => setError(null) };
}

/** Whether an item's editor is open, and the ref of the button that opens it: when the editor
 * closes, focus returns to that button. */
export function useEditor(): {
  editing: boolean;
  setEditing: (on: boolean) => void;
  editButton: RefObject<HTMLButtonElement>;
} {
  const [editing, setEditing] = useState(false);
  const editButton = useRef<HTMLButtonElement>(null);
  const wasEditing = useRef(false);
  useEffect(() => {
    if (wasEditing.current && !editing) editButton.current?.focus();
    wasEditing.current = editing;
  }, [editing]);
  return { editing, setEditing, editButton };
}

/** What the person typed that cannot be sent, said next to the form (nothing when all is well). */
export function Invalid({ message }: { message: string | null }) {
  return message === null ? null : (
    <p role="alert" class="error">
      {message}
    </p>
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
