import type { Memory } from "@engram/client";
import { useEffect, useRef, useState } from "preact/hooks";

/** `If-Match` for what was read: the memory's version in quotes, as its ETag. */
export function ifMatch(memory: Memory): { "If-Match": string } {
  return { "If-Match": `"${memory.version}"` };
}

/** The key and value of a memory, edited in place; `onSave` gets the new pair. With
 * `valueOnly` the key is not offered for editing and `onSave` gets it unchanged. */
export function MemoryEditor({ memory, saveLabel, busy, onSave, onCancel, valueOnly = false }: {
  memory: Memory;
  saveLabel: string;
  busy: boolean;
  onSave: (change: { key: string; value: string }) => void;
  onCancel: () => void;
  valueOnly?: boolean;
}) {
  const [key, setKey] = useState(memory.key);
  const [value, setValue] = useState(memory.value);
  const id = `edit-${memory.id}`;
  const keyField = useRef<HTMLInputElement>(null);
  const valueField = useRef<HTMLTextAreaElement>(null);
  useEffect(() => (valueOnly ? valueField.current : keyField.current)?.focus(), []);
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
      {!valueOnly && (
        <>
          <label for={`${id}-key`}>Key</label>
          <input ref={keyField} id={`${id}-key`} required maxLength={100} value={key} onInput={(e) => setKey(e.currentTarget.value)} />
        </>
      )}
      <label for={`${id}-value`}>Value</label>
      <textarea
        ref={valueField}
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

/** The button that shows or hides a memory's history (its `MemoryHistory`, ui/history.tsx). */
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
