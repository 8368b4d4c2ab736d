import { type components, type ErrorCode, isEngramApiError, type Memory, unwrap } from "@engram/client";
import { useEffect, useState } from "preact/hooks";

import { useSession } from "../session";
import { ChangeText } from "../ui/change";
import { ConfidenceBar } from "../ui/confidence";
import { plural, when } from "../ui/format";
import { MemoryHistory } from "../ui/history";
import { HistoryToggle, ifMatch, MemoryEditor } from "../ui/memory";
import { Empty, ErrorNotice, Flash, Loading, type Meaning, useAction, useEditor, useFlash } from "../ui/states";

const PAGE = 50;
const REVIEW_SCOPES: Record<string, string> = {
  user: "For one user",
  persona: "For everyone using the persona",
  persona_user: "For one user with the persona",
};
const DECIDED: Record<string, string> = { active: "approved", rejected: "rejected", archived: "archived" };

/** One item of the queue: a proposal, or with `current` a change of an active memory. */
type ReviewItem = components["schemas"]["ReviewItemOut"];

/** What a refused merge means (the other answers mean what they mean elsewhere). */
const MERGE_ERRORS: Partial<Record<ErrorCode, Meaning>> = {
  not_found: "This proposal is no longer in the queue (another admin may have decided or merged it). Reload to see the queue now.",
  conflict: "Another admin changed or decided this proposal while it was merged. Nothing was merged. Reload to see the queue now.",
  precondition_failed:
    "Someone changed this proposal after you opened it, so nothing was merged. Reload to see it now, then merge again if it is still a duplicate.",
  invalid_input: {
    title: "Cannot merge these two",
    detail:
      "The memory it duplicates is gone or was rejected meanwhile, or it no longer belongs to the same user and scope. Nothing was merged. Reload to see what it duplicates now.",
  },
};

export function Review() {
  const { api } = useSession();
  const [flash, showFlash] = useFlash();
  const [persona, setPersona] = useState("");
  const [applied, setApplied] = useState("");
  const [items, setItems] = useState<ReviewItem[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [state, setState] = useState<"loading" | "ready" | "error">("loading");
  const [error, setError] = useState<unknown>(null);
  const [selected, setSelected] = useState<Set<string>>(new Set());
  const [bulkBusy, setBulkBusy] = useState(false);
  const [bulkProblems, setBulkProblems] = useState<string[]>([]);
  const [bulkError, setBulkError] = useState<unknown>(null);

  useEffect(() => {
    document.title = "Review · Engram console";
  }, []);

  const load = async (from: string | null, personaId: string) => {
    setState("loading");
    setError(null);
    try {
      const page = await unwrap(
        api.api.GET("/v1/review", {
          params: {
            query: { limit: PAGE, ...(personaId ? { personaId } : {}), ...(from ? { cursor: from } : {}) },
          },
        }),
      );
      setItems((previous) => (from ? [...previous, ...page.memories] : page.memories));
      setCursor(page.nextCursor ?? null);
      if (!from) setSelected(new Set());
      setState("ready");
    } catch (failure) {
      setError(failure);
      setState("error");
    }
  };
  useEffect(() => {
    void load(null, applied);
  }, [api, applied]);

  const drop = (id: string) => {
    setItems((all) => all.filter((m) => m.id !== id));
    setSelected((previous) => {
      const next = new Set(previous);
      next.delete(id);
      return next;
    });
  };
  const replace = (memory: Memory) => setItems((all) => all.map((m) => (m.id === memory.id ? memory : m)));
  /** After `folded` was merged into `survivor`: `folded` leaves the list, the survivor shown is
   * the memory as the merge left it, and a note that named `folded` names the survivor instead
   * (it now holds the same fact), except on the survivor itself. */
  const fold = (folded: string, survivor: Memory) => {
    drop(folded);
    const into = { id: survivor.id, key: survivor.key };
    setItems((all) =>
      all.map((m) => {
        const named = m.duplicateOf?.id === folded;
        if (m.id === survivor.id) return { ...m, ...survivor, duplicateOf: named ? null : m.duplicateOf };
        return named ? { ...m, duplicateOf: into } : m;
      }),
    );
  };
  const toggle = (id: string, on: boolean) =>
    setSelected((previous) => {
      const next = new Set(previous);
      if (on) next.add(id);
      else next.delete(id);
      return next;
    });

  const bulk = async (action: "approve" | "reject") => {
    const ids = items.filter((m) => selected.has(m.id)).map((m) => m.id);
    if (ids.length === 0) return;
    setBulkBusy(true);
    setBulkError(null);
    setBulkProblems([]);
    try {
      const answer = await unwrap(api.api.POST("/v1/review/bulk", { body: { action, ids } }));
      const byId = new Map(items.map((m) => [m.id, m]));
      const problems: string[] = [];
      let done = 0;
      for (const result of answer.results) {
        const name = byId.get(result.id)?.key ?? result.id;
        if (result.ok) {
          done += 1;
          drop(result.id);
        } else if (result.error?.code === "conflict") {
          problems.push(`Conflict: “${name}” was already decided by another admin.`);
          drop(result.id);
        } else if (result.error?.code === "not_found") {
          problems.push(`“${name}” is no longer in the queue.`);
          drop(result.id);
        } else {
          problems.push(`“${name}”: ${result.error?.message ?? "not decided"}.`);
        }
      }
      setBulkProblems(problems);
      showFlash(
        `${action === "approve" ? "Approved" : "Rejected"} ${plural(done, "proposal")}${problems.length ? `; ${plural(problems.length, "was", "were")} not` : ""}.`,
      );
    } catch (failure) {
      setBulkError(failure);
    } finally {
      setBulkBusy(false);
    }
  };

  const count = items.filter((m) => selected.has(m.id)).length;
  const all = items.length > 0 && count === items.length;

  return (
    <div class="stack page">
      <h1>Review</h1>
      <p class="lead">
        Memories Engram proposed from conversations wait here until an admin approves them (they are then recalled) or
        rejects them (the same proposal never comes back). A change to an existing memory shows its current value beside
        the proposed one: approving makes the proposed value the memory's next version; rejecting keeps the memory as it
        is. A proposal that says what another memory says under another key is marked as a possible duplicate: merging
        folds it into that memory.
      </p>
      <form
        class="filters"
        role="search"
        aria-label="Filter the queue"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(persona.trim());
        }}
      >
        <label>
          Persona id
          <input value={persona} onInput={(e) => setPersona(e.currentTarget.value)} placeholder="every persona" />
        </label>
        <div class="actions end">
          <button type="submit">Show</button>
          {applied && (
            <button
              type="button"
              onClick={() => {
                setPersona("");
                setApplied("");
              }}
            >
              Show every persona
            </button>
          )}
        </div>
      </form>
      <Flash message={flash} />
      <section class="card stack" aria-labelledby="queue-title">
        <h2 id="queue-title">Pending proposals{applied ? ` for ${applied}` : ""}</h2>
        {items.length > 0 && (
          <div class="bulk" role="group" aria-label="Bulk actions">
            <label class="check">
              <input
                type="checkbox"
                checked={all}
                onChange={(e) => setSelected(e.currentTarget.checked ? new Set(items.map((m) => m.id)) : new Set())}
              />
              Select all shown
            </label>
            <button type="button" class="primary" disabled={count === 0 || bulkBusy} onClick={() => bulk("approve")}>
              Approve selected ({count})
            </button>
            <button type="button" class="danger" disabled={count === 0 || bulkBusy} onClick={() => bulk("reject")}>
              Reject selected ({count})
            </button>
          </div>
        )}
        {bulkError !== null && <ErrorNotice error={bulkError} onRetry={() => setBulkError(null)} retryLabel="Dismiss" />}
        {bulkProblems.length > 0 && (
          <div role="alert" class="notice error">
            <ul>
              {bulkProblems.map((problem) => (
                <li key={problem}>{problem}</li>
              ))}
            </ul>
          </div>
        )}
        {state === "error" && <ErrorNotice error={error} onRetry={() => void load(items.length ? cursor : null, applied)} />}
        {state === "loading" && items.length === 0 && <Loading what="the review queue" />}
        {state === "ready" && items.length === 0 && (
          <Empty>Nothing to review{applied ? ` for persona ${applied}` : ""}. New proposals appear here as Engram learns from conversations.</Empty>
        )}
        {items.length > 0 && (
          <ul class="items" aria-label="Pending proposals">
            {items.map((memory) => (
              <Proposal
                key={memory.id}
                memory={memory}
                onReloadQueue={() => void load(null, applied)}
                selected={selected.has(memory.id)}
                onSelect={(on) => toggle(memory.id, on)}
                onDecided={(message) => {
                  drop(memory.id);
                  showFlash(message);
                }}
                onChanged={replace}
                onMerged={(survivor) => {
                  fold(memory.id, survivor);
                  showFlash(
                    `Merged “${memory.key}” into “${survivor.key}”: its versions are now the earliest in the history of “${survivor.key}”.`,
                  );
                }}
              />
            ))}
          </ul>
        )}
        {cursor && (
          <div>
            <button type="button" onClick={() => void load(cursor, applied)} disabled={state === "loading"}>
              {state === "loading" ? "Loading…" : "Load more proposals"}
            </button>
          </div>
        )}
      </section>
    </div>
  );
}

/**
 * One item of the queue, with its Approve, Edit and approve, and Reject buttons. A change
 * proposal (`current` set) shows the memory's value now beside the proposed one: its
 * approval makes the proposed value (edited or not) the memory's next version under the
 * memory's id, and only the value can be edited. A proposal's own history is offered; a
 * change has none of its own. A proposal close to another memory (`duplicateOf`) says so and
 * offers Merge, which folds the proposal into that memory (`onMerged` gets the survivor).
 */
function Proposal({ memory, selected, onSelect, onDecided, onChanged, onMerged, onReloadQueue }: {
  memory: ReviewItem;
  selected: boolean;
  onSelect: (on: boolean) => void;
  onDecided: (message: string) => void;
  onChanged: (memory: Memory) => void;
  onMerged: (survivor: Memory) => void;
  onReloadQueue: () => void;
}) {
  const { api } = useSession();
  const { editing, setEditing, editButton } = useEditor();
  const [history, setHistory] = useState(false);
  const deciding = useAction();
  const merging = useAction();
  const busy = deciding.busy || merging.busy;
  const { error, clearError } = deciding;
  /** A decision starts with no merge error shown, as a merge starts with no decision's. */
  const act = (work: () => Promise<void>) => {
    merging.clearError();
    return deciding.act(work);
  };
  const change = memory.current ?? null;
  const duplicate = change ? null : (memory.duplicateOf ?? null);
  const name = memory.key;
  const path = { path: { id: memory.id } };

  const approve = () =>
    act(async () => {
      const approved = await unwrap(api.api.POST("/v1/review/{id}/approve", { params: path, body: {} }));
      onDecided(
        change
          ? `Approved the change to “${approved.key}”: it is version ${approved.version} of the memory from now on.`
          : `Approved “${approved.key}”: it is recalled from now on.`,
      );
    });
  const reject = () =>
    act(async () => {
      await unwrap(api.api.POST("/v1/review/{id}/reject", { params: path }));
      onDecided(
        change
          ? `Rejected the change to “${name}”: the memory keeps its value, and this one will not be proposed again.`
          : `Rejected “${name}”: it will not be proposed again.`,
      );
    });
  /** A change's edited value goes with its approval (a change has no version to edit). */
  const editChangeAndApprove = (edited: { value: string }) =>
    act(async () => {
      const body = edited.value !== memory.value ? { value: edited.value } : {};
      const approved = await unwrap(api.api.POST("/v1/review/{id}/approve", { params: path, body }));
      setEditing(false);
      onDecided(`Approved the change to “${approved.key}” with your changes.`);
    });
  /** The edit is made only on the version read (If-Match), so another admin's edit meanwhile is
   * a conflict, not overwritten; then the edited proposal is approved. */
  const editAndApprove = (edited: { key: string; value: string }) =>
    act(async () => {
      let current: Memory = memory;
      if (edited.key !== memory.key || edited.value !== memory.value) {
        const body: { key?: string; value?: string } = {};
        if (edited.key !== memory.key) body.key = edited.key;
        if (edited.value !== memory.value) body.value = edited.value;
        current = await unwrap(
          api.api.PATCH("/v1/memories/{id}", { params: { ...path, header: ifMatch(memory) }, body: body as { key: string } }),
        );
        onChanged(current);
      }
      const approved = await unwrap(api.api.POST("/v1/review/{id}/approve", { params: path, body: {} }));
      setEditing(false);
      onDecided(`Approved “${approved.key}” with your changes.`);
    });
  /** The merge is made only on the version read (If-Match): a proposal edited meanwhile is a
   * conflict, not folded as it is now. */
  const merge = (into: { id: string; key: string }) => {
    clearError();
    return merging.act(async () => {
      const survivor = await unwrap(
        api.api.POST("/v1/memories/{id}/merge", { params: { ...path, header: ifMatch(memory) }, body: { into: into.id } }),
      );
      onMerged(survivor);
    });
  };
  /** A change cannot be read alone, and what a proposal duplicates is said only by the queue,
   * so after such a failure the queue is read again. */
  const reloadQueue = () => {
    clearError();
    merging.clearError();
    setEditing(false);
    onReloadQueue();
  };
  const reload = () =>
    act(async () => {
      try {
        const fresh = await unwrap(api.api.GET("/v1/memories/{id}", { params: path }));
        if (fresh.status !== "pending_review") {
          onDecided(`“${name}” was already ${DECIDED[fresh.status] ?? fresh.status} by another admin.`);
          return;
        }
        setEditing(false);
        onChanged(fresh);
      } catch (failure) {
        if (isEngramApiError(failure, "not_found")) {
          onDecided(`“${name}” is no longer in the queue.`);
          return;
        }
        throw failure;
      }
    });

  return (
    <li class="item" aria-label={`${change ? "Change to" : "Proposal"} ${name}`}>
      <div class="select">
        <input
          type="checkbox"
          id={`select-${memory.id}`}
          checked={selected}
          aria-label={`Select ${name}`}
          onChange={(e) => onSelect(e.currentTarget.checked)}
        />
      </div>
      <div class="item-main">
        {editing ? (
          <MemoryEditor
            memory={memory}
            saveLabel="Approve with changes"
            busy={busy}
            valueOnly={change !== null}
            onSave={change ? editChangeAndApprove : editAndApprove}
            onCancel={() => setEditing(false)}
          />
        ) : change ? (
          <>
            <p class="item-title">
              <strong>{memory.key}</strong> <span class="tag change">Change to an existing memory</span>
            </p>
            <ChangeText current={change} proposed={memory.value} />
          </>
        ) : (
          <>
            <p class="item-title">
              <span class="key">{memory.key}</span> <span class="value">{memory.value}</span>
            </p>
            {duplicate && (
              <p class="duplicate">
                <strong>Possible duplicate of “{duplicate.key}”</strong>{" "}
                <span class="muted">
                  — another memory with the same owner and scope says much the same. Merge folds this proposal into it; its
                  versions come first in that memory's history.
                </span>
              </p>
            )}
          </>
        )}
        <p class="meta">
          <span class="tag">{REVIEW_SCOPES[memory.scope] ?? memory.scope}</span>
          <ConfidenceBar value={memory.confidence} />
          <span>Proposed {when(memory.createdAt)}</span>
        </p>
        <p class="meta provenance">
          {memory.scope !== "user" && <span>Persona {memory.ownerId}.</span>}
          {memory.userId && <span>About user {memory.userId}.</span>}
          {memory.sourceChannelId ? (
            <span>
              Learnt from conversation <code>{memory.sourceChannelId}</code>.
            </span>
          ) : (
            <span>No conversation recorded.</span>
          )}
        </p>
        {error !== null && (
          <ErrorNotice error={error} onRetry={change ? reloadQueue : reload} retryLabel="Reload" />
        )}
        {merging.error !== null && (
          <ErrorNotice error={merging.error} onRetry={reloadQueue} retryLabel="Reload" details={MERGE_ERRORS} />
        )}
        {history && !change && (
          <MemoryHistory memory={memory} label={name} canRestore onRestored={onChanged} onReload={reload} />
        )}
      </div>
      {!editing && (
        <div class="actions">
          <button type="button" class="primary" aria-label={`Approve ${name}`} disabled={busy} onClick={approve}>
            Approve
          </button>
          <button ref={editButton} type="button" aria-label={`Edit ${name} and approve`} disabled={busy} onClick={() => setEditing(true)}>
            Edit and approve
          </button>
          <button type="button" class="danger" aria-label={`Reject ${name}`} disabled={busy} onClick={reject}>
            Reject
          </button>
          {duplicate && (
            <button
              type="button"
              aria-label={`Merge ${name} into ${duplicate.key}`}
              disabled={busy}
              onClick={() => void merge(duplicate)}
            >
              Merge
            </button>
          )}
          {!change && <HistoryToggle name={name} shown={history} onToggle={setHistory} />}
        </div>
      )}
    </li>
  );
}
