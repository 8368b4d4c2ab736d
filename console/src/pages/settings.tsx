import type { components } from "@engram/client";
import { unwrap } from "@engram/client";
import { Fragment } from "preact";
import { useEffect, useState } from "preact/hooks";

import { useSession } from "../session";
import { when } from "../ui/format";
import { Empty, ErrorNotice, Flash, Invalid, Loading, useAction, useFlash, useLoad } from "../ui/states";

type Persona = components["schemas"]["PersonaResponse"];
type Retention = components["schemas"]["RetentionRule"];

const MAX_DAYS = 36500;
const MAX_PROMPT = 8000;
const ID_RULE = /^[^\u0000-\u001f\u007f-\u009f]{1,128}$/;

export function Settings() {
  const [flash, showFlash] = useFlash();
  useEffect(() => {
    document.title = "Settings · Engram console";
  }, []);
  return (
    <div class="stack page">
      <h1>Settings</h1>
      <p class="lead">Switch memory on or off for your team and each persona, choose who may use a persona, and how long memories are kept.</p>
      <Flash message={flash} />
      <TeamSettings flash={showFlash} />
      <Personas flash={showFlash} />
    </div>
  );
}

// --- retention ---------------------------------------------------------------------------------

interface RetentionDraft {
  archiveAfterDays: string;
  deleteArchivedAfterDays: string;
}

function draftOf(retention: Retention | null | undefined): RetentionDraft {
  return {
    archiveAfterDays: retention?.archiveAfterDays == null ? "" : String(retention.archiveAfterDays),
    deleteArchivedAfterDays: retention?.deleteArchivedAfterDays == null ? "" : String(retention.deleteArchivedAfterDays),
  };
}

/** The rules typed, or the first field that is not a whole number of days in range. */
function retentionOf(draft: RetentionDraft): Retention | string {
  const read = (text: string, label: string): number | null | string => {
    const trimmed = text.trim();
    if (trimmed === "") return null;
    if (!/^\d+$/.test(trimmed) || Number(trimmed) < 1 || Number(trimmed) > MAX_DAYS) {
      return `${label}: a whole number of days from 1 to ${MAX_DAYS}, or empty for no rule.`;
    }
    return Number(trimmed);
  };
  const archive = read(draft.archiveAfterDays, "Archive after");
  if (typeof archive === "string") return archive;
  const remove = read(draft.deleteArchivedAfterDays, "Delete archived after");
  if (typeof remove === "string") return remove;
  return { archiveAfterDays: archive, deleteArchivedAfterDays: remove };
}

/** The two retention rules, each a number of days typed into its own field. */
const RETENTION_RULES: { field: keyof RetentionDraft; suffix: string; label: string }[] = [
  { field: "archiveAfterDays", suffix: "archive", label: "Archive active memories not updated for (days)" },
  { field: "deleteArchivedAfterDays", suffix: "delete", label: "Delete archived memories not updated for (days)" },
];

/** A settings form's submit: `check()` gives what is wrong with what was typed (shown as
 * `invalid`, nothing is sent) or the value `save` sends (its failure shown as `error`). */
function useSettingsForm<T extends object>(check: () => T | string, save: (value: T) => Promise<void>) {
  const { busy, error, act, clearError } = useAction();
  const [invalid, setInvalid] = useState<string | null>(null);
  const submit = async (event: Event) => {
    event.preventDefault();
    const value = check();
    if (typeof value === "string") {
      setInvalid(value);
      return;
    }
    setInvalid(null);
    await act(() => save(value));
  };
  return { busy, error, clearError, invalid, submit };
}

function RetentionFields({ idPrefix, draft, onChange, scope }: {
  idPrefix: string;
  draft: RetentionDraft;
  onChange: (draft: RetentionDraft) => void;
  scope: string;
}) {
  return (
    <fieldset class="stack">
      <legend>Retention</legend>
      <p class="muted">Applies to {scope}. Leave a field empty for no such rule.</p>
      {RETENTION_RULES.map(({ field, suffix, label }) => (
        <Fragment key={field}>
          <label for={`${idPrefix}-${suffix}`}>{label}</label>
          <input
            id={`${idPrefix}-${suffix}`}
            type="number"
            inputMode="numeric"
            min={1}
            max={MAX_DAYS}
            step={1}
            value={draft[field]}
            onInput={(e) => onChange({ ...draft, [field]: e.currentTarget.value })}
          />
        </Fragment>
      ))}
    </fieldset>
  );
}

// --- the team ----------------------------------------------------------------------------------

function TeamSettings({ flash }: { flash: (message: string) => void }) {
  const { api, identity } = useSession();
  const team = useLoad(() => unwrap(api.api.GET("/v1/settings/team")), [api]);
  const [memoryEnabled, setMemoryEnabled] = useState(true);
  const [retention, setRetention] = useState<RetentionDraft>(draftOf(null));
  useEffect(() => {
    if (team.state === "ready") {
      setMemoryEnabled(team.data.memoryEnabled);
      setRetention(draftOf(team.data.retention));
    }
  }, [team.state, team.data]);

  const { busy, error, clearError, invalid, submit } = useSettingsForm(
    () => retentionOf(retention),
    async (rules) => {
      await unwrap(api.api.PUT("/v1/settings/team", { body: { memoryEnabled, retention: rules } }));
      flash(`Saved the settings of team ${identity.teamId}: memory ${memoryEnabled ? "on" : "off"}.`);
      team.reload();
    },
  );

  return (
    <section class="card stack" aria-labelledby="team-title">
      <h2 id="team-title">Team {identity.teamId}</h2>
      {team.state === "loading" && team.data === null && <Loading what="the team settings" />}
      {team.state === "error" && team.data === null && <ErrorNotice error={team.error} onRetry={team.reload} />}
      {team.data !== null && (
        <form class="stack" aria-label="Team settings" onSubmit={submit}>
          <label class="check">
            <input type="checkbox" checked={memoryEnabled} onChange={(e) => setMemoryEnabled(e.currentTarget.checked)} />
            Memory on for the whole team
          </label>
          <p class="muted">
            Off: nothing is saved, recalled or learnt for anyone in the team, whatever each persona says. What is stored is
            kept.
          </p>
          <RetentionFields idPrefix="team" draft={retention} onChange={setRetention} scope="every memory of the team" />
          <Invalid message={invalid} />
          {error !== null && <ErrorNotice error={error} onRetry={clearError} retryLabel="Dismiss" />}
          <div class="actions">
            <button type="submit" class="primary" disabled={busy}>
              {busy ? "Saving…" : "Save team settings"}
            </button>
            <span class="muted">Last changed: {team.data.updatedAt ? when(team.data.updatedAt) : "never (defaults)"}</span>
          </div>
        </form>
      )}
    </section>
  );
}

// --- personas ----------------------------------------------------------------------------------

function blankPersona(personaId: string, teamId: string): Persona {
  return {
    personaId,
    teamId,
    allowedGroups: [],
    memoryEnabled: true,
    extraction: { enabled: false, prompt: null },
    retention: { archiveAfterDays: null, deleteArchivedAfterDays: null },
    updatedAt: null,
  };
}

function Personas({ flash }: { flash: (message: string) => void }) {
  const { api, identity } = useSession();
  const personas = useLoad(() => unwrap(api.api.GET("/v1/personas")).then((r) => r.personas), [api]);
  const [added, setAdded] = useState<Persona[]>([]);
  const [newId, setNewId] = useState("");
  const [invalid, setInvalid] = useState<string | null>(null);

  const known = [...(personas.data ?? []), ...added.filter((a) => !(personas.data ?? []).some((p) => p.personaId === a.personaId))];
  const add = (event: Event) => {
    event.preventDefault();
    const id = newId.trim();
    if (!ID_RULE.test(id)) {
      setInvalid("A persona id is 1 to 128 characters, without control characters.");
      return;
    }
    if (known.some((p) => p.personaId === id)) {
      setInvalid(`Persona ${id} is already configured: edit it below.`);
      return;
    }
    setInvalid(null);
    setAdded([...added, blankPersona(id, identity.teamId)]);
    setNewId("");
  };

  return (
    <section class="card stack" aria-labelledby="personas-title">
      <h2 id="personas-title">Personas</h2>
      <p class="muted">
        A persona never configured here is open to everyone, with memory on and no extraction. Configure one to limit it to
        groups, switch its memory off, or learn from its transcripts.
      </p>
      {personas.state === "loading" && personas.data === null && <Loading what="the personas" />}
      {personas.state === "error" && <ErrorNotice error={personas.error} onRetry={personas.reload} />}
      {personas.data !== null && known.length === 0 && <Empty>No persona is configured yet. Add one below.</Empty>}
      {known.map((persona) => (
        <PersonaForm
          key={persona.personaId}
          persona={persona}
          isNew={!(personas.data ?? []).some((p) => p.personaId === persona.personaId)}
          onSaved={(saved) => {
            flash(`Saved persona ${saved.personaId}.`);
            personas.reload();
          }}
        />
      ))}
      <form class="stack add-persona" aria-label="Add a persona" onSubmit={add}>
        <h3>Add a persona</h3>
        <label>
          New persona id
          <input value={newId} maxLength={128} onInput={(e) => setNewId(e.currentTarget.value)} placeholder="e.g. helpdesk" />
        </label>
        <Invalid message={invalid} />
        <div>
          <button type="submit">Add persona</button>
        </div>
      </form>
    </section>
  );
}

function PersonaForm({ persona, isNew, onSaved }: { persona: Persona; isNew: boolean; onSaved: (saved: Persona) => void }) {
  const { api } = useSession();
  const [groups, setGroups] = useState(persona.allowedGroups.join(", "));
  const [memoryEnabled, setMemoryEnabled] = useState(persona.memoryEnabled);
  const [extraction, setExtraction] = useState(persona.extraction.enabled);
  const [prompt, setPrompt] = useState(persona.extraction.prompt ?? "");
  const [retention, setRetention] = useState<RetentionDraft>(draftOf(persona.retention));
  const id = `persona-${persona.personaId.replace(/[^A-Za-z0-9_-]/g, "_")}`;

  const { busy, error, clearError, invalid, submit } = useSettingsForm(
    () => {
      const rules = retentionOf(retention);
      if (typeof rules === "string") return rules;
      const allowedGroups = [...new Set(groups.split(",").map((g) => g.trim()).filter(Boolean))];
      return allowedGroups.length > 100 ? "At most 100 allowed groups." : { rules, allowedGroups };
    },
    async ({ rules, allowedGroups }) => {
      const saved = await unwrap(
        api.api.PUT("/v1/personas/{personaId}", {
          params: { path: { personaId: persona.personaId } },
          body: {
            allowedGroups,
            memoryEnabled,
            extraction: { enabled: extraction, prompt: prompt.trim() === "" ? null : prompt },
            retention: rules,
          },
        }),
      );
      onSaved(saved);
    },
  );

  return (
    <form class="card nested stack" aria-label={`Persona ${persona.personaId}`} onSubmit={submit}>
      <h3>
        Persona {persona.personaId}
        {isNew && <span class="tag new">not saved yet</span>}
      </h3>
      <label for={`${id}-groups`}>Allowed groups</label>
      <input
        id={`${id}-groups`}
        value={groups}
        aria-describedby={`${id}-groups-help`}
        onInput={(e) => setGroups(e.currentTarget.value)}
        placeholder="everyone"
      />
      <p id={`${id}-groups-help`} class="muted">
        Comma-separated group names (from the sign-in's groups). Empty: everyone in the team.
      </p>
      <label class="check">
        <input type="checkbox" checked={memoryEnabled} onChange={(e) => setMemoryEnabled(e.currentTarget.checked)} />
        Memory on
      </label>
      <label class="check">
        <input type="checkbox" checked={extraction} onChange={(e) => setExtraction(e.currentTarget.checked)} />
        Extraction on (propose memories from this persona's transcripts)
      </label>
      <label for={`${id}-prompt`}>Extraction prompt</label>
      <textarea
        id={`${id}-prompt`}
        rows={4}
        maxLength={MAX_PROMPT}
        value={prompt}
        aria-describedby={`${id}-prompt-help`}
        onInput={(e) => setPrompt(e.currentTarget.value)}
      />
      <p id={`${id}-prompt-help`} class="muted">
        What the extractor should look for. Empty: the default prompt. At most {MAX_PROMPT} characters.
      </p>
      <RetentionFields idPrefix={id} draft={retention} onChange={setRetention} scope="this persona's memories" />
      <Invalid message={invalid} />
      {error !== null && <ErrorNotice error={error} onRetry={clearError} retryLabel="Dismiss" />}
      <div class="actions">
        <button type="submit" class="primary" disabled={busy} aria-label={`Save persona ${persona.personaId}`}>
          {busy ? "Saving…" : "Save persona"}
        </button>
        {persona.updatedAt ? <span class="muted">Last changed {when(persona.updatedAt)}</span> : null}
      </div>
    </form>
  );
}
