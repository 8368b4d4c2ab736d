import type { Memory } from "@engram/client";
import { unwrap } from "@engram/client";
import { useEffect, useRef, useState } from "preact/hooks";

import { useSession } from "../session";
import { when } from "./format";
import { ErrorNotice, Loading, useLoad } from "./states";

/** `If-Match` for what was read: the memory's version in quotes, as its ETag. */
export function ifMatch(memory: Memory): { "If-Match": string } {
  return { "If-Match": `"${memory.version}"` };
}

/** The key and value of a memory, edited in place; `onSave` gets the new pair. */
export function MemoryEditor({ memory, saveLabel, busy, onSave, onCancel }: {
  memory: Memory;
  saveLabel: string;
  busy: boolean;
  onSave: (change: { key: string; value: string }) => void;
  onCancel: () => void;
}) {
  const [key, setKey] = useState(memory.key);
  const [value, setValue] = useState(memory.value);
  const id = `edit-${memory.id}`;
  const first = useRef<HTMLInputElement>(null);
  useEffect(() => first.current?.focus(), []);
  return (
    <form
      class="stack editor"
      aria-label={`Edit ${memory.key}`}
      onSubmit={(e) => {
        e.preventDefault();
        onSave({ key: key.trim(), value });
      }}
      onKeyDown={(e) => {
        if (e.key === "Escape") onCancel();
      }}
    >
      <label for={`${id}-key`}>Key</label>
      <input ref={first} id={`${id}-key`} required maxLength={100} value={key} onInput={(e) => setKey(e.currentTarget.value)} />
      <label for={`${id}-value`}>Value</label>
      <textarea
        id={`${id}-value`}
        required
        maxLength={2000}
        rows={3}
        value={value}
        onInput={(e) => setValue(e.currentTarget.value)}
      />
      <div class="actions">
        <button type="submit" class="primary" disabled={busy}>
          {saveLabel}
        </button>
        <button type="button" onClick={onCancel} disabled={busy}>
          Cancel
        </button>
      </div>
    </form>
  );
}

const ACTION_LABELS: Record<string, string> = {
  approve: "approved",
  reject: "rejected",
  edit: "edited",
  update: "edited",
  delete: "deleted",
  archive: "archived",
};

/** The button that shows or hides a memory's history (its `MemoryHistory`). */
export function HistoryToggle({ name, shown, onToggle }: {
  name: string;
  shown: boolean;
  onToggle: (shown: boolean) => void;
}) {
  return (
    <button
      type="button"
      aria-label={`${shown ? "Hide history of" : "History of"} ${name}`}
      aria-expanded={shown}
      onClick={() => onToggle(!shown)}
    >
      {shown ? "Hide history" : "History"}
    </button>
  );
}

/** Every approve, reject, edit and delete of one memory, oldest first. */
export function MemoryHistory({ memoryId, label }: { memoryId: string; label: string }) {
  const { api } = useSession();
  const history = useLoad(
    () => unwrap(api.api.GET("/v1/memories/{id}/history", { params: { path: { id: memoryId } } })),
    [api, memoryId],
  );
  return (
    <section class="history" aria-label={`History of ${label}`}>
      <h4>History</h4>
      {history.state === "loading" && <Loading what="the history" />}
      {history.state === "error" && <ErrorNotice error={history.error} onRetry={history.reload} />}
      {history.state === "ready" &&
        (history.data.actions.length === 0 ? (
          <p class="muted">No review or edit yet: it is as it was first saved.</p>
        ) : (
          <ol>
            {history.data.actions.map((action) => (
              <li key={action.id}>
                <strong>{ACTION_LABELS[action.action] ?? action.action}</strong> by {action.actorId} on {when(action.at)}
                {action.before && action.after && (action.before.value !== action.after.value || action.before.key !== action.after.key) && (
                  <span class="muted">
                    {" "}
                    — “{action.before.key}: {action.before.value}” → “{action.after.key}: {action.after.value}”
                  </span>
                )}
              </li>
            ))}
          </ol>
        ))}
    </section>
  );
}
