-- The erasure log (DELETE /v1/me): who was erased and when, until the maintenance job has
-- stopped re-checking for leftovers (purged_at set). One row per erasure.
CREATE TABLE erasures (
  team_id    text NOT NULL,
  user_id    text NOT NULL,
  erased_at  timestamptz NOT NULL,
  purged_at  timestamptz,
  PRIMARY KEY (team_id, user_id, erased_at)
);
-- The job's work list: erasures not yet purged, oldest first.
CREATE INDEX erasures_pending
  ON erasures (erased_at, team_id COLLATE "C", user_id COLLATE "C") WHERE purged_at IS NULL;

-- Row-level security as in 0001: a tenant sees its own team's erasures; a user records only
-- their own erasure (team admins anyone's of their team). Not FORCEd, like memories: the
-- table owner runs the SECURITY DEFINER functions below, which read across teams.
ALTER TABLE erasures ENABLE ROW LEVEL SECURITY;

CREATE POLICY erasures_read ON erasures FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true));
CREATE POLICY erasures_insert ON erasures FOR INSERT TO engram_app
  WITH CHECK (team_id = current_setting('engram.team_id', true)
              AND (user_id = current_setting('engram.user_id', true)
                   OR current_setting('engram.is_admin', true) = 'on'));

GRANT SELECT, INSERT ON erasures TO engram_app;

-- The maintenance job walks erasures of every team. It cannot see them through RLS (it acts
-- in no team); these two functions are its only cross-team access: the pending list (ids and
-- times, nothing else) and marking one erasure purged. Keyset order = ErasureRecord.key.
CREATE FUNCTION engram_pending_erasures(
    after_at timestamptz, after_team text, after_user text, lim integer)
  RETURNS TABLE (team_id text, user_id text, erased_at timestamptz)
  LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
  SELECT e.team_id, e.user_id, e.erased_at
    FROM public.erasures e
   WHERE e.purged_at IS NULL
     AND (after_at IS NULL
          OR (e.erased_at, e.team_id COLLATE "C", e.user_id COLLATE "C")
             > (after_at, after_team COLLATE "C", after_user COLLATE "C"))
   ORDER BY e.erased_at, e.team_id COLLATE "C", e.user_id COLLATE "C"
   LIMIT greatest(lim, 0)
$$;

CREATE FUNCTION engram_mark_erasure_purged(
    p_team text, p_user text, p_erased_at timestamptz, p_now timestamptz)
  RETURNS boolean
  LANGUAGE sql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
  UPDATE public.erasures SET purged_at = p_now
   WHERE team_id = p_team AND user_id = p_user AND erased_at = p_erased_at
     AND purged_at IS NULL
  RETURNING true
$$;

REVOKE ALL ON FUNCTION engram_pending_erasures(timestamptz, text, text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_mark_erasure_purged(text, text, timestamptz, timestamptz)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_pending_erasures(timestamptz, text, text, integer)
  TO engram_app;
GRANT EXECUTE ON FUNCTION engram_mark_erasure_purged(text, text, timestamptz, timestamptz)
  TO engram_app;
