-- Explicit memories (seed 003): memories, personas, team settings, review audit.
-- {{embedding_dimensions}} is fixed when this migration is applied (Settings.embedding_dimensions).
CREATE EXTENSION IF NOT EXISTS vector;

-- The non-owner role the service acts as, so row-level security always applies.
DO $$
BEGIN
  CREATE ROLE engram_app NOLOGIN;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
  NULL;
END
$$;

DO $$
BEGIN
  EXECUTE format('GRANT engram_app TO %I', current_user);
EXCEPTION WHEN others THEN
  RAISE NOTICE 'could not grant engram_app to %: %', current_user, SQLERRM;
END
$$;

-- Full-text input: path, address and identifier punctuation becomes a word break, so
-- "Europe/Berlin" or "ops@example.com" are found by any of their words (as in the
-- in-memory adapter). Used by the stored tsvector and by every query.
CREATE OR REPLACE FUNCTION engram_fts_text(t text) RETURNS text
  LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  RETURN translate(t, '/\@.:_+=#~|', '           ');

CREATE TABLE memories (
  id                uuid PRIMARY KEY,
  team_id           text NOT NULL,
  scope             text NOT NULL CHECK (scope IN ('user', 'persona', 'persona_user')),
  owner_id          text NOT NULL,
  user_id           text,
  key               text NOT NULL CHECK (char_length(key) BETWEEN 1 AND 100),
  value             text NOT NULL CHECK (char_length(value) BETWEEN 1 AND 2000),
  source_channel_id text,
  confidence        double precision NOT NULL DEFAULT 1
                    CHECK (confidence >= 0 AND confidence <= 1),
  status            text NOT NULL DEFAULT 'active'
                    CHECK (status IN ('active', 'pending_review', 'archived')),
  embedding         vector({{embedding_dimensions}}),
  tsv               tsvector GENERATED ALWAYS AS
                    (to_tsvector('english'::regconfig, engram_fts_text(key || ' ' || value))) STORED,
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL,
  CHECK ((scope = 'persona_user') = (user_id IS NOT NULL))
);

-- seed §3.2: primary lookup, persona+user, dedup, full text, provenance; plus list/retention
-- primary lookup, also ordered as an empty-query recall reads it (confidence, then recency)
CREATE INDEX memories_primary
  ON memories (team_id, scope, owner_id, status, confidence DESC, updated_at DESC, id)
  WHERE status = 'active';
CREATE INDEX memories_persona_user ON memories (team_id, owner_id, user_id)
  WHERE scope = 'persona_user';
CREATE UNIQUE INDEX memories_dedup
  ON memories (team_id, scope, owner_id, COALESCE(user_id, ''), key);
CREATE INDEX memories_fts ON memories USING gin (tsv);
CREATE INDEX memories_provenance ON memories (team_id, source_channel_id)
  WHERE source_channel_id IS NOT NULL;
CREATE INDEX memories_listing ON memories (team_id, created_at DESC, id DESC);
CREATE INDEX memories_retention ON memories (team_id, status, updated_at);

-- An owner belongs to one team: tell the planner, so per-user estimates are not 10x low.
CREATE STATISTICS memories_owner_team (dependencies) ON team_id, owner_id FROM memories;

-- HNSW supports up to 2,000 dimensions for vector(D).
DO $$
BEGIN
  IF {{embedding_dimensions}} <= 2000 THEN
    EXECUTE 'CREATE INDEX memories_embedding_hnsw ON memories '
            'USING hnsw (embedding vector_cosine_ops)';
  END IF;
END
$$;

CREATE TABLE personas (
  team_id            text NOT NULL,
  persona_id         text NOT NULL,
  allowed_groups     text[] NOT NULL DEFAULT '{}',
  memory_enabled     boolean NOT NULL DEFAULT true,
  extraction_enabled boolean NOT NULL DEFAULT false,
  extraction_prompt  text,
  updated_at         timestamptz NOT NULL,
  PRIMARY KEY (team_id, persona_id)
);

CREATE TABLE team_settings (
  team_id        text PRIMARY KEY,
  memory_enabled boolean NOT NULL DEFAULT true,
  updated_at     timestamptz NOT NULL
);

CREATE TABLE review_actions (
  id        uuid PRIMARY KEY,
  seq       bigint GENERATED ALWAYS AS IDENTITY,
  team_id   text NOT NULL,
  memory_id uuid NOT NULL,
  actor_id  text NOT NULL,
  action    text NOT NULL,
  before    jsonb,
  after     jsonb,
  at        timestamptz NOT NULL
);
CREATE INDEX review_actions_memory ON review_actions (team_id, memory_id, at);

-- Row-level security: every row belongs to a team; the tenant comes from transaction-local
-- settings (engram.team_id, engram.user_id, engram.is_admin) the adapter sets per transaction.
-- Without them current_setting(..., true) is NULL and no row qualifies.
-- memories is not FORCEd: its owner (the migrating role) runs engram_fts_match below.
ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE personas ENABLE ROW LEVEL SECURITY;
ALTER TABLE personas FORCE ROW LEVEL SECURITY;
ALTER TABLE team_settings ENABLE ROW LEVEL SECURITY;
ALTER TABLE team_settings FORCE ROW LEVEL SECURITY;
ALTER TABLE review_actions ENABLE ROW LEVEL SECURITY;
ALTER TABLE review_actions FORCE ROW LEVEL SECURITY;

CREATE POLICY memories_read ON memories FOR SELECT TO engram_app USING (
  team_id = current_setting('engram.team_id', true)
  AND (
    current_setting('engram.is_admin', true) = 'on'
    OR (scope = 'user' AND owner_id = current_setting('engram.user_id', true))
    OR (scope = 'persona_user' AND user_id = current_setting('engram.user_id', true))
    OR scope = 'persona'
  )
);
CREATE POLICY memories_write ON memories FOR ALL TO engram_app
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

CREATE POLICY personas_read ON personas FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true));
CREATE POLICY personas_write ON personas FOR ALL TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on')
  WITH CHECK (team_id = current_setting('engram.team_id', true)
              AND current_setting('engram.is_admin', true) = 'on');

CREATE POLICY team_settings_read ON team_settings FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true));
CREATE POLICY team_settings_write ON team_settings FOR ALL TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on')
  WITH CHECK (team_id = current_setting('engram.team_id', true)
              AND current_setting('engram.is_admin', true) = 'on');

CREATE POLICY review_actions_read ON review_actions FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on');
CREATE POLICY review_actions_insert ON review_actions FOR INSERT TO engram_app
  WITH CHECK (team_id = current_setting('engram.team_id', true));

-- Full-text candidates for recall. Under row-level security PostgreSQL may not use a
-- non-leakproof operator such as @@ as an index condition, so a recall would scan every row
-- of the user. This SECURITY DEFINER function does the indexed match with the tenant taken
-- from the same transaction settings RLS uses (never from arguments), and returns ids and
-- ranks only: the caller joins them back to memories, where RLS filters every row again.
CREATE FUNCTION engram_fts_match(q tsquery, persona text)
  RETURNS TABLE (id uuid, rank real)
  LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 20
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF persona IS NULL THEN
    RETURN QUERY
      SELECT m.id, ts_rank(m.tsv, q)
        FROM public.memories m
       WHERE m.team_id = current_setting('engram.team_id', true)
         AND m.scope = 'user'
         AND m.owner_id = current_setting('engram.user_id', true)
         AND m.status = 'active'
         AND m.tsv @@ q;
  ELSE
    RETURN QUERY
      SELECT m.id, ts_rank(m.tsv, q)
        FROM public.memories m
       WHERE m.team_id = current_setting('engram.team_id', true)
         AND m.status = 'active'
         AND m.tsv @@ q
         AND ((m.scope = 'user' AND m.owner_id = current_setting('engram.user_id', true))
              OR (m.scope = 'persona' AND m.owner_id = persona)
              OR (m.scope = 'persona_user' AND m.owner_id = persona
                  AND m.user_id = current_setting('engram.user_id', true)));
  END IF;
END
$$;
REVOKE ALL ON FUNCTION engram_fts_match(tsquery, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_fts_match(tsquery, text) TO engram_app;

GRANT USAGE ON SCHEMA public TO engram_app;
GRANT SELECT, INSERT, UPDATE, DELETE ON memories, personas, team_settings TO engram_app;
GRANT SELECT, INSERT ON review_actions TO engram_app;
