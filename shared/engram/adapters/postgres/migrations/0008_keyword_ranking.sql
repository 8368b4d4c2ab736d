-- Keyword recall ranked by BM25 over the caller's own memories, times query-word coverage.
--
-- PostgreSQL's ts_rank knows nothing of how rare a word is, so a match on a word in half of
-- a user's memories counted as much as a match on a word in one. engram_fts_rank scores each
-- memory matching any query lexeme by
--
--   coverage * sum over the matched query lexemes t of
--     ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5)) * tf * (k1 + 1) / (tf + k1)
--
-- where N is the number of the caller's visible active memories, df(t) how many of them
-- contain t, tf how often t occurs in the memory, and coverage = matched / distinct query
-- lexemes. There is no length normalisation (BM25's b = 0): a memory is short by
-- construction, and a longer one holds more facts rather than the same words repeated.
--
-- Document frequencies cost no stored statistics: the OR match already returns every visible
-- memory containing any query lexeme, so df(t) is a count over rows the query reads anyway,
-- and N is an index-only count of the caller's active rows (memories_primary). Both are
-- exact, follow every write at once, and scale with the caller's memories, not the table.
--
-- Visible = the tenant's rows as engram_fts_match (0001) selects them: the caller's user
-- memories, plus the persona's persona and persona_user rows of this user when a persona is
-- given; statistics are taken before the caller drops shadowed keys. The two helpers are
-- SECURITY DEFINER for the same reason as engram_fts_match (an indexed @@ under RLS) and, like
-- it, take the tenant from the transaction settings RLS uses, never from arguments.
-- engram_fts_match stays for code of the previous release still running during a deploy.

CREATE FUNCTION engram_fts_hits(q tsquery, persona text)
  RETURNS TABLE (id uuid, tsv tsvector)
  LANGUAGE plpgsql STABLE SECURITY DEFINER ROWS 100
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF persona IS NULL THEN
    RETURN QUERY
      SELECT m.id, m.tsv
        FROM public.memories m
       WHERE m.team_id = current_setting('engram.team_id', true)
         AND m.scope = 'user'
         AND m.owner_id = current_setting('engram.user_id', true)
         AND m.status = 'active'
         AND m.tsv @@ q;
  ELSE
    RETURN QUERY
      SELECT m.id, m.tsv
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

CREATE FUNCTION engram_visible_count(persona text)
  RETURNS bigint
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
DECLARE
  n bigint;
BEGIN
  SELECT count(*) INTO n
    FROM public.memories m
   WHERE m.team_id = current_setting('engram.team_id', true)
     AND m.scope = 'user'
     AND m.owner_id = current_setting('engram.user_id', true)
     AND m.status = 'active';
  IF persona IS NOT NULL THEN
    n := n + (SELECT count(*)
                FROM public.memories m
               WHERE m.team_id = current_setting('engram.team_id', true)
                 AND m.scope = 'persona'
                 AND m.owner_id = persona
                 AND m.status = 'active')
           + (SELECT count(*)
                FROM public.memories m
               WHERE m.team_id = current_setting('engram.team_id', true)
                 AND m.scope = 'persona_user'
                 AND m.owner_id = persona
                 AND m.user_id = current_setting('engram.user_id', true)
                 AND m.status = 'active');
  END IF;
  RETURN n;
END
$$;

-- The score of every visible memory matching any lexeme of `query` (analysed with `cfg`, path
-- punctuation split as in the stored tsv). k1 is BM25's term-frequency saturation; the
-- service passes it. Not a definer function: it reads only what the two helpers return.
-- PL/pgSQL rather than SQL so that it is never inlined into the caller's query: its plan is
-- cached across calls, and the caller's join is planned from ROWS (a few ids, looked up by
-- primary key) instead of the default estimate of an aggregate (which chose to read every
-- row of the caller to hash-join a handful).
CREATE FUNCTION engram_fts_rank(query text, cfg regconfig, persona text, k1 double precision)
  RETURNS TABLE (id uuid, score double precision)
  LANGUAGE plpgsql STABLE ROWS 20
  SET search_path = pg_catalog, public
AS $$
BEGIN
  RETURN QUERY
  WITH q AS MATERIALIZED (
    SELECT tsvector_to_array(to_tsvector(cfg, public.engram_fts_text(query))) AS lexemes,
           replace(plainto_tsquery(cfg, public.engram_fts_text(query))::text, ' & ', ' | ')
             ::tsquery AS tsq
  ), hits AS MATERIALIZED (
    -- each memory's query lexemes with their counts: the stored tsv carries no weights (all
    -- D), so marking the query's lexemes A and keeping only A leaves exactly those, and the
    -- set-returning unnest then reads one or two entries per memory instead of all of them
    SELECT s.id, (s.t).lexeme, cardinality((s.t).positions)::double precision AS tf
      FROM (SELECT h.id, unnest(ts_filter(setweight(h.tsv, 'A', q.lexemes), '{a}')) AS t
              FROM q, public.engram_fts_hits(q.tsq, persona) h) s
  ), df AS MATERIALIZED (
    SELECT hits.lexeme, count(*)::double precision AS df FROM hits GROUP BY hits.lexeme
  ), n AS MATERIALIZED (
    SELECT public.engram_visible_count(persona)::double precision AS n
  )
  SELECT hits.id,
         sum(ln(1 + (n.n - df.df + 0.5) / (df.df + 0.5)) * hits.tf * (k1 + 1) / (hits.tf + k1))
           * count(*) / max(cardinality(q.lexemes))
    FROM hits JOIN df ON df.lexeme = hits.lexeme CROSS JOIN n CROSS JOIN q
   GROUP BY hits.id;
END
$$;

REVOKE ALL ON FUNCTION engram_fts_hits(tsquery, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_visible_count(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_fts_rank(text, regconfig, text, double precision) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_fts_hits(tsquery, text) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_visible_count(text) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_fts_rank(text, regconfig, text, double precision) TO engram_app;
