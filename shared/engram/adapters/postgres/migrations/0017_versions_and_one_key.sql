-- Every write a version, and one key however it is spelt: the expand half.
--
-- memory_versions holds each recorded version of a memory (engram.memories.versions): its key,
-- value and status after a write, who made it, through what, and while it was current. The
-- owner fields say who may read a version once its memory is gone, with the policies of
-- memories. A deletion is a version (status 'deleted'), so a memory's history outlives it.
--
-- A row's identity is COALESCE(key_canonical, key): key_canonical holds the canonical key
-- (engram.memories.keys.canonical_key) where it differs from the key, else NULL, so the rows
-- whose key is already canonical need no rewrite here (a rewrite of every row updates every
-- index of the table: minutes for a million rows, each row locked meanwhile). The service
-- writes it with every key. The previous release's statements do not name it: while
-- they run during a deploy, engram_key_canonical (the rule as SQL can state it: NFKC,
-- lower-cased, separators one space, surrounding punctuation dropped) fills it in for them;
-- it agrees with the service's rule except where Unicode case folding and lower-casing in the
-- database's locale differ. Migration 0018 computes the column for existing rows, merges
-- rows whose keys now collide, and adds the unique index the service upserts against; the
-- previous release's index (memories_dedup, exact keys) stays until the release after this
-- one drops it.

CREATE TABLE memory_versions (
  team_id        text NOT NULL,
  memory_id      uuid NOT NULL,
  version        bigint NOT NULL CHECK (version >= 1),
  scope          text NOT NULL,
  owner_id       text NOT NULL,
  user_id        text,
  source_user_id text,
  key            text NOT NULL,
  value          text NOT NULL,
  status         text NOT NULL
                 CHECK (status IN ('active', 'pending_review', 'archived', 'rejected', 'deleted')),
  actor_id       text NOT NULL,
  actor_kind     text NOT NULL
                 CHECK (actor_kind IN ('user', 'admin', 'service', 'extraction', 'maintenance')),
  surface        text NOT NULL,
  created_at     timestamptz NOT NULL,
  valid_from     timestamptz NOT NULL,
  valid_to       timestamptz,
  PRIMARY KEY (team_id, memory_id, version)
);
-- the version a write closes, and history retention's scan
CREATE INDEX memory_versions_current ON memory_versions (team_id, memory_id)
  WHERE valid_to IS NULL;
CREATE INDEX memory_versions_ended ON memory_versions (valid_to) WHERE valid_to IS NOT NULL;

ALTER TABLE memory_versions ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_versions_read ON memory_versions FOR SELECT TO engram_app USING (
  team_id = current_setting('engram.team_id', true)
  AND (
    current_setting('engram.is_admin', true) = 'on'
    OR (scope = 'user' AND owner_id = current_setting('engram.user_id', true))
    OR (scope = 'persona_user' AND user_id = current_setting('engram.user_id', true))
    OR scope = 'persona'
  )
);
CREATE POLICY memory_versions_write ON memory_versions FOR ALL TO engram_app
USING (
  team_id = current_setting('engram.team_id', true)
  AND (
    current_setting('engram.is_admin', true) = 'on'
    OR (scope = 'user' AND owner_id = current_setting('engram.user_id', true))
    OR (scope = 'persona_user' AND user_id = current_setting('engram.user_id', true))
  )
)
WITH CHECK (
  team_id = current_setting('engram.team_id', true)
  AND (
    current_setting('engram.is_admin', true) = 'on'
    OR (scope = 'user' AND owner_id = current_setting('engram.user_id', true))
    OR (scope = 'persona_user' AND user_id = current_setting('engram.user_id', true))
  )
);
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_versions TO engram_app;

ALTER TABLE memories ADD COLUMN key_canonical text;

CREATE FUNCTION engram_key_canonical(k text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT regexp_replace(
           regexp_replace(lower(normalize(k, NFKC)), '[[:space:]_-]+', ' ', 'g'),
           '^[[:punct:][:space:]]+|[[:punct:][:space:]]+$', '', 'g')
$$;

-- The previous release's writes: a row it inserts, or a key it renames, gets its identity.
CREATE FUNCTION engram_memory_key_canonical() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
  canon text;
BEGIN
  IF NEW.key_canonical IS NULL
     OR (TG_OP = 'UPDATE' AND NEW.key IS DISTINCT FROM OLD.key
         AND NEW.key_canonical IS NOT DISTINCT FROM OLD.key_canonical) THEN
    canon := engram_key_canonical(NEW.key);
    NEW.key_canonical := CASE WHEN canon = NEW.key THEN NULL ELSE canon END;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER memories_key_canonical BEFORE INSERT OR UPDATE OF key, key_canonical ON memories
  FOR EACH ROW EXECUTE FUNCTION engram_memory_key_canonical();

-- The version (ETag) moves with a new version (key, value, status) or a new confidence only:
-- an embedding, a person's-edit mark or a re-save of what the row holds leaves it.
CREATE OR REPLACE FUNCTION engram_memory_next_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.key, NEW.value, NEW.status, NEW.confidence)
     IS DISTINCT FROM (OLD.key, OLD.value, OLD.status, OLD.confidence) THEN
    NEW.version := OLD.version + 1;
  END IF;
  RETURN NEW;
END
$$;

-- History retention (ENGRAM_HISTORY_RETENTION_DAYS), across teams: the maintenance job calls
-- it from a transaction that acts in no team; a request acting in a team is refused. Up to
-- lim versions that stopped being current before `before`, and whole histories of memories
-- deleted before it.
CREATE FUNCTION engram_purge_history(before timestamptz, lim integer) RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
DECLARE
  purged integer;
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION 'engram_purge_history is for the maintenance job (no tenant)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  WITH doomed AS (
    SELECT v.team_id, v.memory_id, v.version FROM public.memory_versions v
     WHERE v.valid_to < before
        OR EXISTS (SELECT 1 FROM public.memory_versions d
                    WHERE d.team_id = v.team_id AND d.memory_id = v.memory_id
                      AND d.valid_to IS NULL AND d.status = 'deleted' AND d.valid_from < before)
     LIMIT greatest(lim, 0)
  )
  DELETE FROM public.memory_versions v USING doomed
   WHERE (v.team_id, v.memory_id, v.version) = (doomed.team_id, doomed.memory_id, doomed.version);
  GET DIAGNOSTICS purged = ROW_COUNT;
  RETURN purged;
END
$$;
REVOKE ALL ON FUNCTION engram_purge_history(timestamptz, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_purge_history(timestamptz, integer) TO engram_app;
