-- A contribution read before its user's erasure is not written after it. The maintenance job
-- reads a user's facts, then writes their contribution; an erasure between the two used to
-- leave the contribution behind. This overload takes the time the facts were read, shares the
-- user's erasure lock (the advisory lock an erasure holds exclusively until it commits), and
-- writes nothing when an erasure of the user is at or after that time. The six-argument
-- function stays for the previous release until the release after this one.

CREATE FUNCTION engram_insights_contribute(
    p_team text, p_user text, p_kinds text[], p_subjects text[], p_confidences float8[],
    p_cycle bigint, p_read_at timestamptz)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  PERFORM public.engram_insights_refuse_tenant('engram_insights_contribute');
  PERFORM pg_advisory_xact_lock_shared(4543059, hashtext(p_team || chr(31) || p_user));
  IF EXISTS (SELECT 1 FROM public.erasures
              WHERE team_id = p_team AND user_id = p_user AND erased_at >= p_read_at) THEN
    RETURN false;
  END IF;
  DELETE FROM public.insight_contributions WHERE team_id = p_team AND user_id = p_user;
  INSERT INTO public.insight_contributions (team_id, user_id, kind, subject, confidence, cycle)
  SELECT p_team, p_user, k, s, c, p_cycle
    FROM unnest(p_kinds, p_subjects, p_confidences) AS u(k, s, c)
  ON CONFLICT (team_id, user_id, kind, subject) DO UPDATE SET confidence = EXCLUDED.confidence;
  RETURN true;
END
$$;

REVOKE ALL ON FUNCTION engram_insights_contribute(
    text, text, text[], text[], float8[], bigint, timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_insights_contribute(
    text, text, text[], text[], float8[], bigint, timestamptz) TO engram_app;
