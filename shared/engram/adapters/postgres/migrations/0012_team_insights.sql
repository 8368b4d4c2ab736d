-- Team insights (docs/insights.md): what a team's users have in common, k-anonymous.
--
-- insight_contributions holds each user's contribution as the maintenance job last read it
-- from their facts: a tool they have an affinity for or avoid, a domain they prefer, with the
-- fact's current confidence. It is personal data: only the job writes it (through the
-- functions below), the user's erasure deletes it (row-level security lets a user delete
-- their own rows), and no API reads it. team_insights holds what the job published at the end
-- of its last pass: per team and tool or domain, the number of distinct users and mean
-- confidences, only for rows at least min_users users contribute to. Team admins read their
-- own team's rows under row-level security.

CREATE TABLE insight_contributions (
  team_id    text NOT NULL,
  user_id    text NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('tool_affinity', 'tool_avoidance', 'domain_preference')),
  subject    text NOT NULL,
  confidence double precision NOT NULL CHECK (confidence >= 0 AND confidence <= 1),
  cycle      bigint NOT NULL,
  PRIMARY KEY (team_id, user_id, kind, subject)
);
CREATE INDEX insight_contributions_cycle ON insight_contributions (cycle);

CREATE TABLE team_insights (
  team_id                   text NOT NULL,
  kind                      text NOT NULL CHECK (kind IN ('tool', 'domain')),
  subject                   text NOT NULL,
  users                     integer NOT NULL,
  users_with_affinity       integer NOT NULL DEFAULT 0,
  users_with_avoidance      integer NOT NULL DEFAULT 0,
  mean_affinity_confidence  double precision,
  mean_avoidance_confidence double precision,
  mean_confidence           double precision,
  min_users                 integer NOT NULL,
  aggregated_at             timestamptz NOT NULL,
  PRIMARY KEY (team_id, kind, subject)
);

-- One row per team that has been aggregated (even to nothing): when, so a team admin knows
-- how fresh the figures are.
CREATE TABLE team_insights_runs (
  team_id       text PRIMARY KEY,
  aggregated_at timestamptz NOT NULL,
  min_users     integer NOT NULL
);

ALTER TABLE insight_contributions ENABLE ROW LEVEL SECURITY;
CREATE POLICY insight_contributions_own ON insight_contributions FOR ALL TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND (user_id = current_setting('engram.user_id', true)
              OR current_setting('engram.is_admin', true) = 'on'));
GRANT SELECT, DELETE ON insight_contributions TO engram_app;

ALTER TABLE team_insights ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_insights_admins ON team_insights FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on');
GRANT SELECT ON team_insights TO engram_app;

ALTER TABLE team_insights_runs ENABLE ROW LEVEL SECURITY;
CREATE POLICY team_insights_runs_admins ON team_insights_runs FOR SELECT TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on');
GRANT SELECT ON team_insights_runs TO engram_app;

CREATE FUNCTION engram_insights_refuse_tenant(fn text) RETURNS void
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION '% is for the maintenance job (no tenant)', fn
      USING ERRCODE = 'insufficient_privilege';
  END IF;
END
$$;

-- Replace one user's contribution.
CREATE FUNCTION engram_insights_contribute(
    p_team text, p_user text, p_kinds text[], p_subjects text[], p_confidences float8[],
    p_cycle bigint)
  RETURNS void
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  PERFORM public.engram_insights_refuse_tenant('engram_insights_contribute');
  DELETE FROM public.insight_contributions WHERE team_id = p_team AND user_id = p_user;
  INSERT INTO public.insight_contributions (team_id, user_id, kind, subject, confidence, cycle)
  SELECT p_team, p_user, k, s, c, p_cycle
    FROM unnest(p_kinds, p_subjects, p_confidences) AS u(k, s, c)
  ON CONFLICT (team_id, user_id, kind, subject) DO UPDATE SET confidence = EXCLUDED.confidence;
END
$$;

-- End of a pass: contributions not refreshed in it go; every team's rows are replaced by the
-- aggregates at least p_min distinct users contribute to, in one transaction.
CREATE FUNCTION engram_insights_publish(p_cycle bigint, p_min integer, p_now timestamptz)
  RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
DECLARE n integer;
BEGIN
  PERFORM public.engram_insights_refuse_tenant('engram_insights_publish');
  DELETE FROM public.insight_contributions WHERE cycle < p_cycle;
  DELETE FROM public.team_insights;
  INSERT INTO public.team_insights (team_id, kind, subject, users, users_with_affinity,
      users_with_avoidance, mean_affinity_confidence, mean_avoidance_confidence,
      min_users, aggregated_at)
  SELECT c.team_id, 'tool', c.subject, count(DISTINCT c.user_id),
         count(DISTINCT c.user_id) FILTER (WHERE c.kind = 'tool_affinity'),
         count(DISTINCT c.user_id) FILTER (WHERE c.kind = 'tool_avoidance'),
         CASE WHEN count(DISTINCT c.user_id) FILTER (WHERE c.kind = 'tool_affinity') >= p_min
              THEN round((avg(c.confidence) FILTER (WHERE c.kind = 'tool_affinity'))::numeric, 2)
         END,
         CASE WHEN count(DISTINCT c.user_id) FILTER (WHERE c.kind = 'tool_avoidance') >= p_min
              THEN round((avg(c.confidence) FILTER (WHERE c.kind = 'tool_avoidance'))::numeric, 2)
         END,
         p_min, p_now
    FROM public.insight_contributions c
   WHERE c.kind IN ('tool_affinity', 'tool_avoidance')
   GROUP BY c.team_id, c.subject
  HAVING count(DISTINCT c.user_id) >= p_min;
  INSERT INTO public.team_insights (team_id, kind, subject, users, mean_confidence, min_users,
      aggregated_at)
  SELECT c.team_id, 'domain', c.subject, count(DISTINCT c.user_id),
         round(avg(c.confidence)::numeric, 2), p_min, p_now
    FROM public.insight_contributions c
   WHERE c.kind = 'domain_preference'
   GROUP BY c.team_id, c.subject
  HAVING count(DISTINCT c.user_id) >= p_min;
  SELECT count(*) INTO n FROM public.team_insights;
  UPDATE public.team_insights_runs SET aggregated_at = p_now, min_users = p_min;
  INSERT INTO public.team_insights_runs (team_id, aggregated_at, min_users)
  SELECT DISTINCT c.team_id, p_now, p_min FROM public.insight_contributions c
  ON CONFLICT (team_id) DO NOTHING;
  RETURN n;
END
$$;

REVOKE ALL ON FUNCTION engram_insights_refuse_tenant(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_insights_contribute(text, text, text[], text[], float8[], bigint)
  FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_insights_publish(bigint, integer, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_insights_contribute(text, text, text[], text[], float8[], bigint)
  TO engram_app;
GRANT EXECUTE ON FUNCTION engram_insights_publish(bigint, integer, timestamptz) TO engram_app;
