-- Security review fixes (0002, 0003).
--
-- 1. The maintenance job's SECURITY DEFINER functions read and write across teams and take
--    the team from their arguments. engram_app, the role every request runs as, may execute
--    them, so a request acting as team A could list team B's erasures or mark them purged.
--    The job calls them from a transaction that acts in no team (engram.team_id empty); they
--    now refuse (insufficient_privilege, 42501) whenever a tenant is set in the session.
-- 2. erasures_read let every member of a team read the ids of all erased users of the team:
--    a user now reads only their own erasures, team admins (and the service acting elevated
--    in the team) the team's.

CREATE OR REPLACE FUNCTION engram_pending_erasures(
    after_at timestamptz, after_team text, after_user text, lim integer)
  RETURNS TABLE (team_id text, user_id text, erased_at timestamptz)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION 'engram_pending_erasures is for the maintenance job (no tenant)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  SELECT e.team_id, e.user_id, e.erased_at
    FROM public.erasures e
   WHERE e.purged_at IS NULL
     AND (after_at IS NULL
          OR (e.erased_at, e.team_id COLLATE "C", e.user_id COLLATE "C")
             > (after_at, after_team COLLATE "C", after_user COLLATE "C"))
   ORDER BY e.erased_at, e.team_id COLLATE "C", e.user_id COLLATE "C"
   LIMIT greatest(lim, 0);
END
$$;

CREATE OR REPLACE FUNCTION engram_mark_erasure_purged(
    p_team text, p_user text, p_erased_at timestamptz, p_now timestamptz)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION 'engram_mark_erasure_purged is for the maintenance job (no tenant)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  UPDATE public.erasures e SET purged_at = p_now
   WHERE e.team_id = p_team AND e.user_id = p_user AND e.erased_at = p_erased_at
     AND e.purged_at IS NULL;
  RETURN FOUND;
END
$$;

CREATE OR REPLACE FUNCTION engram_retention_policies(after_key text, lim integer)
  RETURNS TABLE (team_id text, persona_id text, archive_after_days integer,
                 delete_archived_after_days integer)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION 'engram_retention_policies is for the maintenance job (no tenant)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  SELECT p.team_id, p.persona_id, p.archive_after_days, p.delete_archived_after_days
    FROM (
      SELECT t.team_id, NULL::text AS persona_id, t.archive_after_days,
             t.delete_archived_after_days, t.team_id || '/' AS k
        FROM public.team_settings t
       WHERE t.archive_after_days IS NOT NULL OR t.delete_archived_after_days IS NOT NULL
      UNION ALL
      SELECT r.team_id, r.persona_id, r.archive_after_days, r.delete_archived_after_days,
             r.team_id || '/' || r.persona_id AS k
        FROM public.personas r
       WHERE r.archive_after_days IS NOT NULL OR r.delete_archived_after_days IS NOT NULL
    ) p
   WHERE after_key IS NULL OR p.k COLLATE "C" > after_key COLLATE "C"
   ORDER BY p.k COLLATE "C"
   LIMIT greatest(lim, 0);
END
$$;

DROP POLICY erasures_read ON erasures;
CREATE POLICY erasures_read ON erasures FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND (user_id = current_setting('engram.user_id', true)
              OR current_setting('engram.is_admin', true) = 'on'));
