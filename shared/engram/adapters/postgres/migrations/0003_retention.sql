-- Memory retention policies per team and per persona (seed 000, issue 5): archive active
-- memories idle for archive_after_days, hard-delete archived ones idle for
-- delete_archived_after_days. NULL = no such rule.
ALTER TABLE team_settings
  ADD COLUMN archive_after_days integer CHECK (archive_after_days > 0),
  ADD COLUMN delete_archived_after_days integer CHECK (delete_archived_after_days > 0);
ALTER TABLE personas
  ADD COLUMN archive_after_days integer CHECK (archive_after_days > 0),
  ADD COLUMN delete_archived_after_days integer CHECK (delete_archived_after_days > 0);

-- The maintenance job lists the policies of every team (RLS would show it none): keyset
-- pages ordered by 'team/persona' (RetentionPolicy.key, byte order), rows with a rule only.
CREATE FUNCTION engram_retention_policies(after_key text, lim integer)
  RETURNS TABLE (team_id text, persona_id text, archive_after_days integer,
                 delete_archived_after_days integer)
  LANGUAGE sql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
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
   LIMIT greatest(lim, 0)
$$;
REVOKE ALL ON FUNCTION engram_retention_policies(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_retention_policies(text, integer) TO engram_app;
