-- The embedding backlog's index keyed by the model alone.
--
-- memories_embedding_model (0013) was (embedding_model, id): the id is random, so every save
-- wrote its entry into a random leaf of an index as large as the table's primary key (74 MB at
-- a million rows), one more page read and one more full-page image in the WAL of each save at
-- that size. Keyed by the model alone, every entry of a model sits in one run ordered by
-- where its row lies in the table (B-tree deduplication keeps the run compact, a few MB), so a
-- save appends to the end of its model's run, a page the previous saves already touched.
--
-- The backlog reads rows in that order: which rows of the backlog come first does not matter,
-- since a row leaves the backlog once its vector is stored and a run that stops resumes with
-- whatever is left.

DROP INDEX IF EXISTS memories_embedding_model;
CREATE INDEX memories_embedding_model_run ON memories (embedding_model);

CREATE OR REPLACE FUNCTION engram_embedding_backlog(model text, lim integer)
  RETURNS TABLE (id uuid, team_id text, key text, value text)
  LANGUAGE plpgsql STABLE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION 'engram_embedding_backlog is for the maintenance job (no tenant)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  RETURN QUERY
  SELECT b.id, b.team_id, b.key, b.value FROM (
    (SELECT m.id, m.team_id, m.key, m.value FROM public.memories m
      WHERE m.embedding_model IS NULL LIMIT greatest(lim, 0))
    UNION ALL
    (SELECT m.id, m.team_id, m.key, m.value FROM public.memories m
      WHERE m.embedding_model < model ORDER BY m.embedding_model LIMIT greatest(lim, 0))
    UNION ALL
    (SELECT m.id, m.team_id, m.key, m.value FROM public.memories m
      WHERE m.embedding_model > model ORDER BY m.embedding_model LIMIT greatest(lim, 0))
  ) b LIMIT greatest(lim, 0);
END
$$;
