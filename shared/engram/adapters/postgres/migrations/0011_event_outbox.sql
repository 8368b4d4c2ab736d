-- The transactional outbox of domain events (docs/events.md).
--
-- Every change that publishes an event writes its outbox row in the same transaction as the
-- change, so an event exists exactly when its change committed. event_sequences numbers the
-- events of each aggregate (a memory, a user, a team's settings) from 1 without gaps; taking
-- the next number locks the aggregate's counter row until commit, so numbers follow commit
-- order. The relay (the events function) reads and marks rows across teams only through the
-- SECURITY DEFINER functions below, from a transaction that acts in no team: they refuse
-- (insufficient_privilege) whenever a tenant is set, like the maintenance job's functions.

CREATE TABLE event_sequences (
  team_id      text NOT NULL,
  aggregate_id text NOT NULL,  -- 'memory:<id>', 'user:<digest of team and user>' or 'team'
  last_seq     bigint NOT NULL,
  PRIMARY KEY (team_id, aggregate_id)
);

CREATE TABLE event_outbox (
  event_id        uuid PRIMARY KEY,
  position        bigint GENERATED ALWAYS AS IDENTITY,
  team_id         text NOT NULL,
  aggregate_id    text NOT NULL,
  sequence        bigint NOT NULL,
  event_type      text NOT NULL,
  detail          jsonb NOT NULL,
  created_at      timestamptz NOT NULL,
  state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'dead')),
  attempts        integer NOT NULL DEFAULT 0,
  next_attempt_at timestamptz NOT NULL,
  leased_until    timestamptz,
  last_error      text,
  sent_at         timestamptz,
  UNIQUE (team_id, aggregate_id, sequence)
);
-- each aggregate's oldest pending entry (claims); the age and depth of what waits (alarms)
CREATE INDEX event_outbox_pending ON event_outbox (team_id, aggregate_id, sequence)
  WHERE state = 'pending';
CREATE INDEX event_outbox_pending_age ON event_outbox (created_at) WHERE state = 'pending';
CREATE INDEX event_outbox_sent ON event_outbox (sent_at) WHERE state = 'sent';

-- A tenant writes its own team's rows and nothing else: numbers through event_sequences
-- (read and updated by the upsert that takes them), events by insert only. Not FORCEd: the
-- owner runs the relay's functions below.
ALTER TABLE event_sequences ENABLE ROW LEVEL SECURITY;
CREATE POLICY event_sequences_team ON event_sequences FOR ALL TO engram_app
  USING (team_id = current_setting('engram.team_id', true))
  WITH CHECK (team_id = current_setting('engram.team_id', true));
GRANT SELECT, INSERT, UPDATE ON event_sequences TO engram_app;

ALTER TABLE event_outbox ENABLE ROW LEVEL SECURITY;
CREATE POLICY event_outbox_insert ON event_outbox FOR INSERT TO engram_app
  WITH CHECK (team_id = current_setting('engram.team_id', true));
GRANT INSERT ON event_outbox TO engram_app;

CREATE FUNCTION engram_outbox_refuse_tenant(fn text) RETURNS void
  LANGUAGE plpgsql STABLE
  SET search_path = pg_catalog
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION '% is for the event relay (no tenant)', fn
      USING ERRCODE = 'insufficient_privilege';
  END IF;
END
$$;

-- Up to lim entries due at p_now, at most one per aggregate: the aggregate's oldest pending
-- entry, when it is due and no live lease holds it. The claimed entries are leased until
-- p_now + p_lease; a concurrent claim skips them (the re-checked WHERE of the UPDATE).
CREATE FUNCTION engram_outbox_claim(lim integer, p_lease interval, p_now timestamptz)
  RETURNS TABLE (event_id uuid, event_type text, detail jsonb, attempts integer,
                 "position" bigint)
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
#variable_conflict use_column
BEGIN
  PERFORM public.engram_outbox_refuse_tenant('engram_outbox_claim');
  RETURN QUERY
  WITH heads AS (
    SELECT DISTINCT ON (o.team_id, o.aggregate_id) o.event_id, o.next_attempt_at,
           o.leased_until, o.position
      FROM public.event_outbox o
     WHERE o.state = 'pending'
     ORDER BY o.team_id, o.aggregate_id, o.sequence
  ), due AS (
    SELECT h.event_id FROM heads h
     WHERE h.next_attempt_at <= p_now AND (h.leased_until IS NULL OR h.leased_until <= p_now)
     ORDER BY h.position
     LIMIT greatest(lim, 0)
  )
  UPDATE public.event_outbox o SET leased_until = p_now + p_lease
    FROM due
   WHERE o.event_id = due.event_id AND o.state = 'pending'
     AND (o.leased_until IS NULL OR o.leased_until <= p_now)
  RETURNING o.event_id, o.event_type, o.detail, o.attempts, o.position;
END
$$;

CREATE FUNCTION engram_outbox_sent(ids uuid[], p_now timestamptz) RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
DECLARE n integer;
BEGIN
  PERFORM public.engram_outbox_refuse_tenant('engram_outbox_sent');
  UPDATE public.event_outbox SET state = 'sent', sent_at = p_now, leased_until = NULL
   WHERE event_id = ANY(ids) AND state <> 'sent';
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

CREATE FUNCTION engram_outbox_failed(
    p_id uuid, p_error text, p_retry_at timestamptz, p_dead boolean)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  PERFORM public.engram_outbox_refuse_tenant('engram_outbox_failed');
  UPDATE public.event_outbox
     SET attempts = attempts + 1, last_error = p_error, next_attempt_at = p_retry_at,
         leased_until = NULL, state = CASE WHEN p_dead THEN 'dead' ELSE 'pending' END
   WHERE event_id = p_id AND state = 'pending';
  RETURN FOUND;
END
$$;

CREATE FUNCTION engram_outbox_prune(p_before timestamptz, lim integer) RETURNS integer
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
DECLARE n integer;
BEGIN
  PERFORM public.engram_outbox_refuse_tenant('engram_outbox_prune');
  DELETE FROM public.event_outbox
   WHERE event_id IN (SELECT o.event_id FROM public.event_outbox o
                       WHERE o.state = 'sent' AND o.sent_at < p_before
                       ORDER BY o.sent_at LIMIT greatest(lim, 0));
  GET DIAGNOSTICS n = ROW_COUNT;
  RETURN n;
END
$$;

CREATE FUNCTION engram_outbox_stats(p_now timestamptz)
  RETURNS TABLE (pending bigint, dead bigint, oldest_pending_age_s double precision)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  PERFORM public.engram_outbox_refuse_tenant('engram_outbox_stats');
  RETURN QUERY
  SELECT (SELECT count(*) FROM public.event_outbox WHERE state = 'pending'),
         (SELECT count(*) FROM public.event_outbox WHERE state = 'dead'),
         coalesce(extract(epoch FROM p_now - (SELECT min(created_at) FROM public.event_outbox
                                              WHERE state = 'pending'))::double precision,
                  0);
END
$$;

REVOKE ALL ON FUNCTION engram_outbox_refuse_tenant(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_outbox_claim(integer, interval, timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_outbox_sent(uuid[], timestamptz) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_outbox_failed(uuid, text, timestamptz, boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_outbox_prune(timestamptz, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_outbox_stats(timestamptz) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_outbox_claim(integer, interval, timestamptz) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_outbox_sent(uuid[], timestamptz) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_outbox_failed(uuid, text, timestamptz, boolean)
  TO engram_app;
GRANT EXECUTE ON FUNCTION engram_outbox_prune(timestamptz, integer) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_outbox_stats(timestamptz) TO engram_app;
