import type { components, ErrorCode, Memory } from "@engram/client";
import { unwrap } from "@engram/client";
import { useEffect, useRef, useState } from "preact/hooks";

import { useSession } from "../session";
import { ChangeText } from "./change";
import { ConfidenceBar } from "./confidence";
import { DiffText } from "./diff";
import { STATUS_LABELS, when } from "./format";
import { ifMatch } from "./memory";
import { ErrorNotice, Flash, Loading, useAction, useFlash } from "./states";

type Version = components["schemas"]["MemoryVersionOut"];
type Action = components["schemas"]["MemoryActionOut"];
type PendingChange = components["schemas"]["PendingChangeOut"];

/** Versions asked for at a time (`GET /v1/memories/{id}/history?limit=`). */
export const HISTORY_PAGE = 50;

const ACTION_LABELS: Record<string, string> = {
  approve: "approved",
  reject: "rejected",
  edit: "edited",
  update: "edited",
  delete: "deleted",
  archive: "archived",
  restore: "restored an earlier version",
  merge: "merged a duplicate into it",
};

/** What a refused restore means (the other answers mean what they mean elsewhere). */
const RESTORE_ERRORS: Partial<Record<ErrorCode, string>> = {
  not_found: "That version is no longer kept (or the memory is gone). Reload to see its history now.",
  conflict:
    "Another memory now has that version's key, or the memory cannot be changed any more (a rejected proposal). Nothing was changed.",
  precondition_failed:
    "Someone changed this memory after you opened it, so nothing was restored. Reload to see its history now, then restore again.",
};

const VERSION_STATUS: Record<string, string> = { ...STATUS_LABELS, deleted: "Deleted" };

/** Who made a version, as what (`actorKind`). */
const ACTOR_KINDS: Record<string, string> = {
  user: "the user",
  admin: "an admin",
  service: "the service",
  extraction: "the extraction job",
  maintenance: "the maintenance job",
};

/** Through what a version was made (`surface`). */
export function surfaceLabel(surface: string): string {
  if (surface.startsWith("tool:")) return `a tool call (${surface.slice("tool:".length)} format)`;
  return (
    {
      api: "the API",
      mcp: "MCP",
      console: "the console",
      extraction: "extraction",
      maintenance: "maintenance",
    }[surface] ?? surface
  );
}

interface Loaded {
  versions: Version[];
  actions: Action[];
  recordedFrom: number | null;
  nextCursor: string | null;
  /** Pages loaded so far: a refresh loads as many again. */
  pages: number;
  /** A new value learnt for the memory, waiting in the review queue. */
  pendingChange: PendingChange | null;
}

/**
 * A memory's history: every recorded version, oldest first, each with what changed from the
 * one before (key and value, word by word), its status, who made it as what and through what,
 * and while it was current; then the review and edit actions. With `canRestore`, each version
 * but the current one can be made current again (`POST /v1/memories/{id}/restore`, with
 * `If-Match` of the memory as shown): `onRestored` gets the memory then. It reloads when the
 * memory's version changes. `onReload` reloads the memory after a conflict. A change the
 * extraction job learnt for the memory and that waits for review (`pendingChange`) is shown
 * first, as the memory's value now beside the proposed one (`ChangeText`).
 */
export function MemoryHistory({ memory, label, canRestore, onRestored, onReload }: {
  memory: Memory;
  label: string;
  canRestore: boolean;
  onRestored: (memory: Memory) => void;
  onReload: () => void;
}) {
  const { api } = useSession();
  const [loaded, setLoaded] = useState<Loaded | null>(null);
  const [state, setState] = useState<"loading" | "ready" | "error">("loading");
  const [loadError, setLoadError] = useState<unknown>(null);
  const [flash, showFlash] = useFlash();
  const restoring = useAction();
  const generation = useRef(0);
  const current = useRef<Loaded | null>(null);
  current.current = loaded;

  const page = (cursor: string | null) =>
    unwrap(
      api.api.GET("/v1/memories/{id}/history", {
        params: { path: { id: memory.id }, query: { limit: HISTORY_PAGE, ...(cursor ? { cursor } : {}) } },
      }),
    );

  /** From the first version, as many pages as were shown (all of them when the last was). */
  const refresh = async () => {
    const mine = ++generation.current;
    const before = current.current;
    const wanted = before === null ? 1 : before.nextCursor === null ? Number.POSITIVE_INFINITY : before.pages;
    setState("loading");
    setLoadError(null);
    try {
      const first = await page(null);
      const next: Loaded = {
        versions: [...first.versions],
        actions: first.actions,
        recordedFrom: first.recordedFrom ?? null,
        nextCursor: first.nextCursor ?? null,
        pages: 1,
        pendingChange: first.pendingChange ?? null,
      };
      while (next.nextCursor !== null && next.pages < wanted) {
        const more = await page(next.nextCursor);
        next.versions.push(...more.versions);
        next.actions = more.actions;
        next.nextCursor = more.nextCursor ?? null;
        next.pages += 1;
      }
      if (mine !== generation.current) return;
      setLoaded(next);
      setState("ready");
    } catch (failure) {
      if (mine !== generation.current) return;
      setLoadError(failure);
      setState("error");
    }
  };

  const later = async () => {
    const before = current.current;
    if (before === null || before.nextCursor === null) return;
    const mine = ++generation.current;
    setState("loading");
    setLoadError(null);
    try {
      const more = await page(before.nextCursor);
      if (mine !== generation.current) return;
      setLoaded({
        versions: [...before.versions, ...more.versions],
        actions: more.actions,
        recordedFrom: more.recordedFrom ?? before.recordedFrom,
        nextCursor: more.nextCursor ?? null,
        pages: before.pages + 1,
        pendingChange: more.pendingChange ?? null,
      });
      setState("ready");
    } catch (failure) {
      if (mine !== generation.current) return;
      setLoadError(failure);
      setState("error");
    }
  };

  useEffect(() => {
    void refresh();
  }, [api, memory.id, memory.version]);

  const restore = (version: Version) =>
    restoring.act(async () => {
      const restored = await unwrap(
        api.api.POST("/v1/memories/{id}/restore", {
          params: { path: { id: memory.id }, header: ifMatch(memory) },
          body: { version: version.version },
        }),
      );
      if (restored.version === memory.version) {
        showFlash(`It already says what version ${version.version} said: nothing changed.`);
        return;
      }
      showFlash(`Restored version ${version.version}: it is now version ${restored.version}.`);
      onRestored(restored); // the memory's new version reloads this history
    });

  const versions = loaded?.versions ?? [];
  const recordedFrom = loaded?.recordedFrom ?? null;
  const actions = loaded?.actions ?? [];
  const pending = loaded?.pendingChange ?? null;

  return (
    <section class="history stack" aria-label={`History of ${label}`}>
      <h4>History</h4>
      <Flash message={flash} />
      {state === "loading" && loaded === null && <Loading what="the history" />}
      {state === "error" && <ErrorNotice error={loadError} onRetry={() => void refresh()} />}
      {restoring.error !== null && (
        <ErrorNotice
          error={restoring.error}
          retryLabel="Dismiss"
          details={RESTORE_ERRORS}
          onRetry={() => {
            restoring.clearError();
            onReload();
            void refresh();
          }}
        />
      )}
      {loaded !== null && (
        <>
          {pending !== null && <WaitingChange memory={memory} change={pending} label={label} />}
          {recordedFrom !== null && recordedFrom > 1 && (
            <p class="muted">
              History recorded from version {recordedFrom}: the versions before it were saved before Engram kept
              history.
            </p>
          )}
          {versions.length === 0 ? (
            <p class="muted">No version of it was recorded.</p>
          ) : (
            <ol class="versions" aria-label={`Versions of ${label}`}>
              {versions.map((version, index) => (
                <VersionItem
                  key={version.version}
                  version={version}
                  previous={index > 0 ? (versions[index - 1] ?? null) : null}
                  restorable={canRestore && !isCurrent(version)}
                  busy={restoring.busy}
                  onRestore={() => restore(version)}
                />
              ))}
            </ol>
          )}
          {loaded.nextCursor !== null && (
            <div>
              <button
                type="button"
                aria-label={`Show later versions of ${label}`}
                disabled={state === "loading"}
                onClick={() => void later()}
              >
                {state === "loading" ? "Loading…" : "Show later versions"}
              </button>
            </div>
          )}
          <h5>Reviews and edits</h5>
          {actions.length === 0 ? (
            <p class="muted">No review or edit yet: it is as it was first saved.</p>
          ) : (
            <ol class="actions-log">
              {actions.map((action) => (
                <li key={action.id}>
                  <strong>{ACTION_LABELS[action.action] ?? action.action}</strong> by {action.actorId} on {when(action.at)}
                  {action.before &&
                    action.after &&
                    (action.before.value !== action.after.value || action.before.key !== action.after.key) && (
                      <span class="muted">
                        {" "}
                        — “{action.before.key}: {action.before.value}” → “{action.after.key}: {action.after.value}”
                      </span>
                    )}
                </li>
              ))}
            </ol>
          )}
        </>
      )}
    </section>
  );
}

/** A value learnt for the memory that waits for an admin's review: the memory's value now
 * beside it, what changes word by word, and how sure the extraction job was. */
function WaitingChange({ memory, change, label }: { memory: Memory; change: PendingChange; label: string }) {
  return (
    <section class="waiting-change stack" aria-label={`Change waiting for review of ${label}`}>
      <h5>A change is waiting for review</h5>
      <p class="muted">
        Engram learnt a new value for it on {when(change.createdAt)}. An admin decides in Review whether it becomes the
        memory's next version; until then the memory keeps its value.
      </p>
      <ChangeText current={{ id: memory.id, version: memory.version, value: memory.value }} proposed={change.value} />
      <p class="meta">
        <ConfidenceBar value={change.confidence} />
      </p>
    </section>
  );
}

/** The version in force now: the last, unless it recorded the deletion. */
function isCurrent(version: Version): boolean {
  return (version.validTo ?? null) === null && version.status !== "deleted";
}

function VersionItem({ version, previous, restorable, busy, onRestore }: {
  version: Version;
  previous: Version | null;
  restorable: boolean;
  busy: boolean;
  onRestore: () => void;
}) {
  const now = isCurrent(version);
  const sameText = previous !== null && previous.key === version.key && previous.value === version.value;
  return (
    <li class="version" aria-label={`Version ${version.version}`}>
      <p class="version-head">
        <strong>Version {version.version}</strong>{" "}
        <span class={`tag status-${version.status}`}>{VERSION_STATUS[version.status] ?? version.status}</span>
        {now && <span class="tag current">Current</span>}
      </p>
      {previous === null ? (
        <p class="muted">
          {version.version === 1 ? "Created." : `The first version recorded (nothing earlier to compare with).`}
        </p>
      ) : sameText ? (
        <p class="muted">
          Key and value unchanged from version {previous.version}
          {previous.status !== version.status
            ? `; status ${VERSION_STATUS[previous.status] ?? previous.status} → ${VERSION_STATUS[version.status] ?? version.status}`
            : ""}
          .
        </p>
      ) : (
        <p class="muted">Changes from version {previous.version}:</p>
      )}
      <dl class="version-text">
        <div>
          <dt>Key</dt>
          <dd>{previous === null ? version.key : <DiffText before={previous.key} after={version.key} />}</dd>
        </div>
        <div>
          <dt>Value</dt>
          <dd>{previous === null ? version.value : <DiffText before={previous.value} after={version.value} />}</dd>
        </div>
      </dl>
      <p class="meta">
        <span>
          By <strong>{version.actorId}</strong>, as {ACTOR_KINDS[version.actorKind] ?? version.actorKind}, through{" "}
          {surfaceLabel(version.surface)}
        </span>
        <span>
          {version.status === "deleted" ? `Deleted ${when(version.validFrom)}` : `Current from ${when(version.validFrom)}`}
          {version.validTo !== null && version.validTo !== undefined ? ` until ${when(version.validTo)}` : now ? " (still current)" : ""}
        </span>
      </p>
      {restorable && (
        <div class="actions">
          <button type="button" aria-label={`Restore version ${version.version}`} disabled={busy} onClick={onRestore}>
            Restore
          </button>
        </div>
      )}
    </li>
  );
}
