import type { components } from "@engram/client";
import { type Memory, unwrap } from "@engram/client";
import { useEffect, useRef, useState } from "preact/hooks";

import { useSession } from "../session";
import { ConfidenceBar } from "../ui/confidence";
import { CATEGORY_LABELS, plural, SCOPE_LABELS, STATUS_LABELS, when } from "../ui/format";
import { MemoryHistory } from "../ui/history";
import { HistoryToggle, ifMatch, MemoryEditor } from "../ui/memory";
import { Empty, ErrorNotice, Flash, Loading, useAction, useEditor, useFlash, useLoad } from "../ui/states";

type Fact = components["schemas"]["FactOut"];
type Receipt = components["schemas"]["ErasureReceipt"];
type Scope = Memory["scope"];
type Status = Memory["status"];

export function MyMemory() {
  const [flash, showFlash] = useFlash();
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    document.title = "My memory · Engram console";
  }, []);
  return (
    <div class="stack page">
      <h1>My memory</h1>
      <p class="lead">What Engram has learnt about you and the memories it keeps for you. You can correct, archive or delete any of them.</p>
      <Flash message={flash} />
      <Facts key={`facts-${generation}`} flash={showFlash} />
      <Memories key={`memories-${generation}`} flash={showFlash} />
      <Export flash={showFlash} />
      <Erase onErased={() => setGeneration((g) => g + 1)} />
    </div>
  );
}

// --- learnt facts ------------------------------------------------------------------------------

function Facts({ flash }: { flash: (message: string) => void }) {
  const { api } = useSession();
  const facts = useLoad(() => unwrap(api.api.GET("/v1/facts")).then((r) => r.facts), [api]);
  const [forgotten, setForgotten] = useState<Set<string>>(new Set());
  const [actionError, setActionError] = useState<unknown>(null);

  const forget = async (fact: Fact) => {
    setActionError(null);
    try {
      await unwrap(api.api.DELETE("/v1/facts/{factId}", { params: { path: { factId: fact.id } } }));
      setForgotten((previous) => new Set(previous).add(fact.id));
      flash(`Forgot “${fact.content}”.`);
    } catch (error) {
      setActionError(error);
    }
  };
  const shown = (facts.data ?? []).filter((fact) => !forgotten.has(fact.id));

  return (
    <section class="card stack" aria-labelledby="facts-title">
      <h2 id="facts-title">Learnt facts</h2>
      <p class="muted">Patterns Engram noticed in how you work. Confidence fades when a pattern is not seen again.</p>
      {actionError !== null && <ErrorNotice error={actionError} onRetry={() => setActionError(null)} retryLabel="Dismiss" />}
      {facts.state === "loading" && facts.data === null && <Loading what="your facts" />}
      {facts.state === "error" && <ErrorNotice error={facts.error} onRetry={facts.reload} />}
      {facts.data !== null &&
        (shown.length === 0 ? (
          <Empty>Engram has not learnt anything about you yet. Facts appear after you use tools and ask questions through an assistant that uses Engram.</Empty>
        ) : (
          <ul class="items" aria-label="Learnt facts">
            {shown.map((fact) => (
              <li key={fact.id} class="item">
                <div class="item-main">
                  <p class="item-title">{fact.content}</p>
                  <p class="meta">
                    <span class="tag">{CATEGORY_LABELS[fact.category] ?? fact.category}</span>
                    <ConfidenceBar value={fact.confidence} />
                    <span>Reinforced {plural(fact.reinforcementCount, "time")}</span>
                    <span>Last seen {when(fact.lastReinforcedAt)}</span>
                  </p>
                </div>
                <div class="actions">
                  <button type="button" aria-label={`Forget “${fact.content}”`} onClick={() => forget(fact)}>
                    Forget
                  </button>
                </div>
              </li>
            ))}
          </ul>
        ))}
    </section>
  );
}

// --- memories ----------------------------------------------------------------------------------

interface Filters {
  scope: Scope | "";
  status: Status | "";
}

/** The list's two filters, each "any" first and then its values in this order. */
const FILTERS: { field: keyof Filters; label: string; any: string; values: string[]; labels: Record<string, string> }[] = [
  { field: "scope", label: "Scope", any: "All scopes", values: ["user", "persona_user", "persona"], labels: SCOPE_LABELS },
  {
    field: "status",
    label: "Status",
    any: "Any status",
    values: ["active", "archived", "pending_review", "rejected"],
    labels: STATUS_LABELS,
  },
];

function Memories({ flash }: { flash: (message: string) => void }) {
  const [filters, setFilters] = useState<Filters>({ scope: "", status: "" });
  const [search, setSearch] = useState("");
  const [conversation, setConversation] = useState<string | null>(null);

  return (
    <section class="card stack" aria-labelledby="memories-title">
      <h2 id="memories-title">Memories</h2>
      <p class="muted">What you or your assistants saved, and what personas you use remember.</p>
      <div class="filters" role="search" aria-label="Find memories">
        <label>
          Search memories
          <input type="search" value={search} onInput={(e) => setSearch(e.currentTarget.value)} placeholder="key or value" />
        </label>
        {FILTERS.map(({ field, label, any, values, labels }) => (
          <label key={field}>
            {label}
            <select value={filters[field]} onChange={(e) => setFilters({ ...filters, [field]: e.currentTarget.value })}>
              <option value="">{any}</option>
              {values.map((value) => (
                <option key={value} value={value}>
                  {labels[value]}
                </option>
              ))}
            </select>
          </label>
        ))}
      </div>
      <MemoryList
        key={`${filters.scope}/${filters.status}`}
        filters={filters}
        search={search}
        flash={flash}
        onShowConversation={setConversation}
        label="Memories"
      />
      {conversation !== null && (
        <section class="card nested stack" aria-labelledby="conversation-title">
          <h3 id="conversation-title">From conversation {conversation}</h3>
          <p class="muted">Every memory saved or learnt in this conversation.</p>
          <MemoryList
            key={`conversation-${conversation}`}
            filters={{ scope: "", status: "" }}
            sourceChannelId={conversation}
            search=""
            flash={flash}
            onShowConversation={setConversation}
            label={`Memories from conversation ${conversation}`}
          />
          <div>
            <button type="button" onClick={() => setConversation(null)}>
              Close conversation
            </button>
          </div>
        </section>
      )}
    </section>
  );
}

function MemoryList({ filters, sourceChannelId, search, flash, onShowConversation, label }: {
  filters: Filters;
  sourceChannelId?: string;
  search: string;
  flash: (message: string) => void;
  onShowConversation: (conversation: string) => void;
  label: string;
}) {
  const { api } = useSession();
  const [items, setItems] = useState<Memory[]>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [more, setMore] = useState(false);
  const [state, setState] = useState<"loading" | "ready" | "error">("loading");
  const [error, setError] = useState<unknown>(null);

  const load = async (from: string | null) => {
    setState("loading");
    setError(null);
    try {
      const page = await unwrap(
        api.api.GET("/v1/memories/list", {
          params: {
            query: {
              limit: 50,
              ...(filters.scope ? { scope: filters.scope } : {}),
              ...(filters.status ? { status: filters.status } : {}),
              ...(sourceChannelId ? { sourceChannelId } : {}),
              ...(from ? { cursor: from } : {}),
            },
          },
        }),
      );
      setItems((previous) => (from ? [...previous, ...page.memories] : page.memories));
      setCursor(page.nextCursor ?? null);
      setMore(Boolean(page.nextCursor));
      setState("ready");
    } catch (failure) {
      setError(failure);
      setState("error");
    }
  };
  useEffect(() => {
    void load(null);
  }, [api]);

  const needle = search.trim().toLowerCase();
  const shown = needle
    ? items.filter((m) => `${m.key} ${m.value} ${m.sourceChannelId ?? ""}`.toLowerCase().includes(needle))
    : items;
  const replace = (next: Memory) => setItems((all) => all.map((m) => (m.id === next.id ? next : m)));
  const remove = (id: string) => setItems((all) => all.filter((m) => m.id !== id));

  return (
    <div class="stack">
      {state === "error" && <ErrorNotice error={error} onRetry={() => void load(items.length > 0 ? cursor : null)} />}
      {state === "loading" && items.length === 0 && <Loading what="memories" />}
      {state !== "loading" || items.length > 0 ? (
        shown.length === 0 ? (
          state === "ready" && (
            <Empty>
              {needle
                ? `No memory matches “${search.trim()}”${more ? " among those loaded" : ""}.`
                : filters.scope || filters.status
                  ? "No memory with these filters."
                  : "No memories yet. When you tell an assistant to remember something, it appears here."}
            </Empty>
          )
        ) : (
          <ul class="items" aria-label={label}>
            {shown.map((memory) => (
              <MemoryItem
                key={memory.id}
                memory={memory}
                onChanged={replace}
                onRemoved={remove}
                flash={flash}
                onShowConversation={sourceChannelId ? undefined : onShowConversation}
              />
            ))}
          </ul>
        )
      ) : null}
      {more && (
        <div>
          <button type="button" onClick={() => void load(cursor)} disabled={state === "loading"}>
            {state === "loading" ? "Loading…" : "Load more memories"}
          </button>
        </div>
      )}
    </div>
  );
}

function MemoryItem({ memory, onChanged, onRemoved, flash, onShowConversation }: {
  memory: Memory;
  onChanged: (memory: Memory) => void;
  onRemoved: (id: string) => void;
  flash: (message: string) => void;
  onShowConversation: ((conversation: string) => void) | undefined;
}) {
  const { api, identity } = useSession();
  const { editing, setEditing, editButton } = useEditor();
  const [showHistory, setShowHistory] = useState(false);
  const { busy, error, act } = useAction();
  const mine =
    memory.scope === "user"
      ? memory.ownerId === identity.userId
      : memory.scope === "persona_user" && memory.userId === identity.userId;
  const name = memory.key;

  const reload = () =>
    act(async () => {
      try {
        onChanged(await unwrap(api.api.GET("/v1/memories/{id}", { params: { path: { id: memory.id } } })));
      } catch (failure) {
        if ((failure as { code?: string }).code === "not_found") {
          onRemoved(memory.id);
          flash(`“${name}” no longer exists.`);
          return;
        }
        throw failure;
      }
    });
  const save = (change: { key: string; value: string }) =>
    act(async () => {
      const body: { key?: string; value?: string } = {};
      if (change.key !== memory.key) body.key = change.key;
      if (change.value !== memory.value) body.value = change.value;
      if (body.key === undefined && body.value === undefined) {
        setEditing(false);
        return;
      }
      const updated = await unwrap(
        api.api.PATCH("/v1/memories/{id}", {
          params: { path: { id: memory.id }, header: ifMatch(memory) },
          body: body as { key: string },
        }),
      );
      onChanged(updated);
      setEditing(false);
      flash(`Saved “${updated.key}”.`);
    });
  const archive = () =>
    act(async () => {
      const archived = await unwrap(
        api.api.POST("/v1/memories/{id}/archive", { params: { path: { id: memory.id }, header: ifMatch(memory) } }),
      );
      onChanged(archived);
      flash(`Archived “${name}”: it is kept but no longer recalled.`);
    });
  const remove = () =>
    act(async () => {
      await unwrap(api.api.DELETE("/v1/memories/{id}", { params: { path: { id: memory.id }, header: ifMatch(memory) } }));
      onRemoved(memory.id);
      flash(`Deleted “${name}”.`);
    });

  return (
    <li class="item" aria-label={`Memory ${name}`}>
      <div class="item-main">
        {editing ? (
          <MemoryEditor memory={memory} saveLabel="Save" busy={busy} onSave={save} onCancel={() => setEditing(false)} />
        ) : (
          <>
            <p class="item-title">
              <span class="key">{memory.key}</span> <span class="value">{memory.value}</span>
            </p>
            <p class="meta">
              <span class="tag">{SCOPE_LABELS[memory.scope] ?? memory.scope}</span>
              <span class={`tag status-${memory.status}`}>{STATUS_LABELS[memory.status] ?? memory.status}</span>
              <ConfidenceBar value={memory.confidence} />
              <span>Updated {when(memory.updatedAt)}</span>
            </p>
            <p class="meta provenance">
              {memory.scope !== "user" && <span>Persona: {memory.ownerId}. </span>}
              {memory.sourceChannelId ? (
                <span>
                  From conversation <code>{memory.sourceChannelId}</code>
                  {onShowConversation && (
                    <>
                      {" "}
                      <button
                        type="button"
                        class="link"
                        aria-label={`Other memories from conversation ${memory.sourceChannelId}`}
                        onClick={() => onShowConversation(memory.sourceChannelId as string)}
                      >
                        Other memories from this conversation
                      </button>
                    </>
                  )}
                </span>
              ) : (
                <span>Saved directly, not from a conversation.</span>
              )}
            </p>
          </>
        )}
        {error !== null && <ErrorNotice error={error} onRetry={reload} retryLabel="Reload" />}
        {showHistory && (
          <MemoryHistory
            memory={memory}
            label={name}
            canRestore={mine && memory.status !== "rejected"}
            onRestored={onChanged}
            onReload={reload}
          />
        )}
      </div>
      {!editing && (
        <div class="actions">
          {mine && (memory.status === "active" || memory.status === "archived") && (
            <button ref={editButton} type="button" aria-label={`Edit ${name}`} disabled={busy} onClick={() => setEditing(true)}>
              Edit
            </button>
          )}
          {mine && memory.status === "active" && (
            <button type="button" aria-label={`Archive ${name}`} disabled={busy} onClick={archive}>
              Archive
            </button>
          )}
          {mine && (
            <button type="button" class="danger" aria-label={`Delete ${name}`} disabled={busy} onClick={remove}>
              Delete
            </button>
          )}
          <HistoryToggle name={name} shown={showHistory} onToggle={setShowHistory} />
        </div>
      )}
    </li>
  );
}

// --- export and erasure ------------------------------------------------------------------------

function download(filename: string, content: string): void {
  const url = URL.createObjectURL(new Blob([content], { type: "application/json" }));
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

function Export({ flash }: { flash: (message: string) => void }) {
  const { api, identity } = useSession();
  const { busy, error, act } = useAction();
  const run = () =>
    act(async () => {
      const data = await unwrap(api.api.GET("/v1/me/export"));
      const day = new Date(data.exportedAt).toISOString().slice(0, 10);
      const filename = `engram-export-${identity.teamId}-${identity.userId}-${day}.json`.replace(/[^A-Za-z0-9._-]/g, "_");
      download(filename, JSON.stringify(data, null, 2));
      flash(
        `Downloaded ${filename}: ${plural(data.memories.length, "memory", "memories")}, ${plural(data.facts.length, "fact")}, ${plural(data.observations.length, "observation")}.`,
      );
    });
  return (
    <section class="card stack" aria-labelledby="export-title">
      <h2 id="export-title">Export</h2>
      <p class="muted">Everything Engram holds about you, as one JSON file: observations, facts and memories.</p>
      {error !== null && <ErrorNotice error={error} onRetry={run} />}
      <div>
        <button type="button" onClick={run} disabled={busy}>
          {busy ? "Preparing…" : "Download my data (JSON)"}
        </button>
      </div>
    </section>
  );
}

function Erase({ onErased }: { onErased: () => void }) {
  const { api, identity } = useSession();
  const [step, setStep] = useState<"idle" | "confirm" | "erasing" | "done">("idle");
  const [counts, setCounts] = useState<{ memories: number; facts: number; observations: number } | null>(null);
  const [receipt, setReceipt] = useState<Receipt | null>(null);
  const [error, setError] = useState<unknown>(null);
  const confirmHeading = useRef<HTMLHeadingElement>(null);
  const receiptHeading = useRef<HTMLHeadingElement>(null);
  useEffect(() => {
    if (step === "confirm") confirmHeading.current?.focus();
    if (step === "done") receiptHeading.current?.focus();
  }, [step]);

  const open = async () => {
    setStep("confirm");
    setError(null);
    setCounts(null);
    try {
      const data = await unwrap(api.api.GET("/v1/me/export"));
      setCounts({ memories: data.memories.length, facts: data.facts.length, observations: data.observations.length });
    } catch {
      setCounts(null); // the confirmation still names what goes, without the numbers
    }
  };
  const erase = async () => {
    setStep("erasing");
    setError(null);
    try {
      const done = await unwrap(api.api.DELETE("/v1/me"));
      setReceipt(done);
      setStep("done");
      onErased();
    } catch (failure) {
      setError(failure);
      setStep("confirm");
    }
  };

  return (
    <section class="card stack danger-zone" aria-labelledby="erase-title">
      <h2 id="erase-title">Erase everything</h2>
      <p class="muted">Delete everything Engram holds about you in team {identity.teamId}. This cannot be undone.</p>
      {step === "idle" && (
        <div>
          <button type="button" class="danger" onClick={open}>
            Erase everything…
          </button>
        </div>
      )}
      {(step === "confirm" || step === "erasing") && (
        <div role="group" aria-labelledby="erase-confirm-title" class="confirm stack">
          <h3 id="erase-confirm-title" ref={confirmHeading} tabIndex={-1}>Erase everything about {identity.userId}?</h3>
          <p>This permanently deletes:</p>
          <ul>
            <li>
              {counts ? plural(counts.observations, "observation") : "every observation"} of your tool calls and questions
            </li>
            <li>{counts ? plural(counts.facts, "learnt fact") : "every learnt fact"}</li>
            <li>
              {counts ? plural(counts.memories, "memory", "memories") : "every memory"} of yours, in every status, including persona
              memories learnt from your conversations
            </li>
            <li>the review history of those memories, and the record of what you deleted or archived</li>
          </ul>
          <p>Memories other people saved are not affected. Download your data first if you want a copy.</p>
          {error !== null && <ErrorNotice error={error} onRetry={erase} />}
          <div class="actions">
            <button type="button" class="danger" onClick={erase} disabled={step === "erasing"}>
              {step === "erasing" ? "Erasing…" : "Yes, erase everything"}
            </button>
            <button type="button" onClick={() => setStep("idle")} disabled={step === "erasing"}>
              Cancel
            </button>
          </div>
        </div>
      )}
      {step === "done" && receipt !== null && (
        <section aria-labelledby="receipt-title" class="receipt stack" role="status">
          <h3 id="receipt-title" ref={receiptHeading} tabIndex={-1}>Erasure receipt</h3>
          <p>
            Everything about <strong>{receipt.userId}</strong> in team {receipt.teamId} was erased on {when(receipt.erasedAt)}.
          </p>
          <dl class="counts">
            {(
              [
                ["observations", "Observations"],
                ["facts", "Facts"],
                ["memories", "Memories"],
                ["personaMemories", "of which persona memories"],
                ["checkpoints", "Checkpoints"],
                ["reviewActions", "Review history entries"],
                ["suppressions", "Remembered deletions"],
                ["idempotencyRecords", "Retry records"],
              ] as const
            ).map(([field, label]) => (
              <div key={field}>
                <dt>{label}</dt>
                <dd>{receipt.counts[field] ?? 0}</dd>
              </div>
            ))}
          </dl>
          <p class="muted">Identity erased: {receipt.identityId}</p>
        </section>
      )}
    </section>
  );
}
