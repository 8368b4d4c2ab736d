-- The memory lifecycle holds what people decided.
--
-- 1. 'rejected' is its own status. A rejected row stays until the account is erased
--    (retention deletes only 'archived' rows) and no longer holds its key: the dedup index
--    covers the other statuses only, so a new value of a rejected key can be proposed while the
--    rejected row keeps suppressing its own value. Rows rejected before this migration were
--    'archived' with a 'reject' as their latest review action: they become 'rejected'.
-- 2. memory_suppressions: what a person deleted or archived through the API, so that an equal
--    proposal (same team, scope, owner, user, key and value) is not made again. Only a SHA-256
--    digest of the key and value is kept, never their text; erasure deletes the user's rows.
-- 3. source_user_id: the user whose transcript a proposal was learnt from (all scopes), so
--    erasure reaches persona-scope memories learnt from that user; review_actions.about_user_id
--    is the user an audit row is about (its memory's user, or the user it was learnt from).
--    Persona rows learnt before this migration carry no source user: one is attributed here
--    when exactly one user of its team has user or persona_user rows from its conversation
--    (source_channel_id); the others stay unattributed (see docs/memories.md).
-- 4. memory_usage: rows per team, per persona and per user (rejected rows do not count),
--    kept by statement-level triggers, read by quota checks inside the write.

ALTER TABLE memories DROP CONSTRAINT memories_status_check;
ALTER TABLE memories ADD CONSTRAINT memories_status_check
  CHECK (status IN ('active', 'pending_review', 'archived', 'rejected'));

-- review_actions is FORCEd, which would hide its rows from a non-superuser owner (RDS).
ALTER TABLE review_actions NO FORCE ROW LEVEL SECURITY;
UPDATE memories m SET status = 'rejected'
 WHERE m.status = 'archived'
   AND (SELECT r.action FROM review_actions r
         WHERE r.team_id = m.team_id AND r.memory_id = m.id
         ORDER BY r.seq DESC LIMIT 1) = 'reject';

ALTER TABLE review_actions ADD COLUMN about_user_id text;
CREATE INDEX review_actions_about ON review_actions (team_id, about_user_id)
  WHERE about_user_id IS NOT NULL;
ALTER TABLE review_actions FORCE ROW LEVEL SECURITY;

DROP INDEX memories_dedup;
CREATE UNIQUE INDEX memories_dedup
  ON memories (team_id, scope, owner_id, COALESCE(user_id, ''), key)
  WHERE status <> 'rejected';
CREATE INDEX memories_rejected
  ON memories (team_id, scope, owner_id, COALESCE(user_id, ''), key)
  WHERE status = 'rejected';

ALTER TABLE memories ADD COLUMN source_user_id text;
CREATE INDEX memories_source_user ON memories (team_id, source_user_id)
  WHERE source_user_id IS NOT NULL;
CREATE INDEX memories_of_persona_user ON memories (team_id, user_id)
  WHERE scope = 'persona_user';

UPDATE memories p SET source_user_id = o.user_id
  FROM (SELECT team_id, source_channel_id,
               min(CASE scope WHEN 'user' THEN owner_id ELSE user_id END) AS user_id
          FROM memories
         WHERE scope IN ('user', 'persona_user') AND source_channel_id IS NOT NULL
         GROUP BY team_id, source_channel_id
        HAVING count(DISTINCT CASE scope WHEN 'user' THEN owner_id ELSE user_id END) = 1) o
 WHERE p.scope = 'persona' AND p.source_user_id IS NULL
   AND p.team_id = o.team_id AND p.source_channel_id = o.source_channel_id;

CREATE TABLE memory_suppressions (
  team_id        text NOT NULL,
  scope          text NOT NULL CHECK (scope IN ('user', 'persona', 'persona_user')),
  owner_id       text NOT NULL,
  user_key       text NOT NULL,  -- the persona_user's user, '' in the other scopes
  digest         bytea NOT NULL,  -- SHA-256 of the key and the value
  source_user_id text,  -- the user a persona-scope memory was learnt from, if any
  created_at     timestamptz NOT NULL,
  PRIMARY KEY (team_id, scope, owner_id, user_key, digest)
);
CREATE INDEX memory_suppressions_of_user ON memory_suppressions (team_id, user_key);
CREATE INDEX memory_suppressions_source ON memory_suppressions (team_id, source_user_id)
  WHERE source_user_id IS NOT NULL;

-- As for memories: admins and the service's jobs see the team's rows, a user their own.
ALTER TABLE memory_suppressions ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_suppressions FORCE ROW LEVEL SECURITY;
CREATE POLICY memory_suppressions_all ON memory_suppressions FOR ALL TO engram_app
USING (
  team_id = current_setting('engram.team_id', true)
  AND (
    current_setting('engram.is_admin', true) = 'on'
    OR (scope = 'user' AND owner_id = current_setting('engram.user_id', true))
    OR (scope = 'persona_user' AND user_key = current_setting('engram.user_id', true))
  )
)
WITH CHECK (
  team_id = current_setting('engram.team_id', true)
  AND (
    current_setting('engram.is_admin', true) = 'on'
    OR (scope = 'user' AND owner_id = current_setting('engram.user_id', true))
    OR (scope = 'persona_user' AND user_key = current_setting('engram.user_id', true))
  )
);
GRANT SELECT, INSERT, DELETE ON memory_suppressions TO engram_app;

-- Usage counters. kind 'team' (subject ''), 'persona' (persona and persona_user rows of the
-- persona) or 'user' (the user's user and persona_user rows). The triggers below keep them
-- exact for every write (saves, proposals, reviews, deletes, retention, erasure).
CREATE TABLE memory_usage (
  team_id text NOT NULL,
  kind    text NOT NULL CHECK (kind IN ('team', 'persona', 'user')),
  subject text NOT NULL,
  used    bigint NOT NULL,
  PRIMARY KEY (team_id, kind, subject)
);
-- Not FORCEd: the owner's own writes to memories (a later migration, a bulk load) keep their
-- counters too; the service acts as engram_app, confined to its team.
ALTER TABLE memory_usage ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_usage_team ON memory_usage FOR ALL TO engram_app
  USING (team_id = current_setting('engram.team_id', true))
  WITH CHECK (team_id = current_setting('engram.team_id', true));
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_usage TO engram_app;

-- The counters a row of memories counts toward (subject NULL: none of that kind).
CREATE FUNCTION engram_usage_subjects(scope text, owner_id text, user_id text)
  RETURNS TABLE (kind text, subject text)
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  SET search_path = pg_catalog
AS $$
  VALUES ('team', ''),
         ('persona', CASE WHEN scope IN ('persona', 'persona_user') THEN owner_id END),
         ('user', CASE scope WHEN 'user' THEN owner_id WHEN 'persona_user' THEN user_id END)
$$;

INSERT INTO memory_usage (team_id, kind, subject, used)
SELECT m.team_id, s.kind, s.subject, count(*)
  FROM memories m
 CROSS JOIN LATERAL engram_usage_subjects(m.scope, m.owner_id, m.user_id) s
 WHERE m.status <> 'rejected' AND s.subject IS NOT NULL
 GROUP BY m.team_id, s.kind, s.subject;

-- One statement-level trigger function for inserts, deletes and updates: the rows a
-- statement added count +1, the rows it removed -1 (an update: both), per counter.
CREATE FUNCTION engram_count_memories() RETURNS trigger
  LANGUAGE plpgsql
  SET search_path = pg_catalog, public
AS $$
DECLARE
  cols constant text := 'team_id, scope, owner_id, user_id, status';
  added constant text := 'SELECT ' || cols || ', 1 AS delta FROM engram_new_rows';
  removed constant text := 'SELECT ' || cols || ', -1 AS delta FROM engram_old_rows';
  changed text := CASE TG_OP
    WHEN 'INSERT' THEN added
    WHEN 'DELETE' THEN removed
    ELSE added || ' UNION ALL ' || removed
  END;
BEGIN
  EXECUTE 'INSERT INTO public.memory_usage AS u (team_id, kind, subject, used)'
    ' SELECT d.team_id, s.kind, s.subject, sum(d.delta) FROM (' || changed || ') d'
    ' CROSS JOIN LATERAL public.engram_usage_subjects(d.scope, d.owner_id, d.user_id) s'
    ' WHERE d.status <> ''rejected'' AND s.subject IS NOT NULL'
    ' GROUP BY d.team_id, s.kind, s.subject HAVING sum(d.delta) <> 0'
    ' ON CONFLICT (team_id, kind, subject) DO UPDATE SET used = u.used + EXCLUDED.used';
  RETURN NULL;
END
$$;

CREATE TRIGGER memories_count_inserts AFTER INSERT ON memories
  REFERENCING NEW TABLE AS engram_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION engram_count_memories();
CREATE TRIGGER memories_count_deletes AFTER DELETE ON memories
  REFERENCING OLD TABLE AS engram_old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION engram_count_memories();
CREATE TRIGGER memories_count_updates AFTER UPDATE ON memories
  REFERENCING OLD TABLE AS engram_old_rows NEW TABLE AS engram_new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION engram_count_memories();
