-- Embeddings follow the embedder.
--
-- 1. Each row records what made its vector: embedding_model (the embedder's model id) and
--    embedding_dims. NULL model: not embedded (saved without an embedder, or while it was
--    down). A model with a NULL vector: that model gives no vector for this text. Vectors are
--    only ever compared with vectors of the same model, so the column takes any dimension
--    (untyped vector) and a change of embedder needs no schema change: rows of the old model
--    are embedded again in bounded batches (engram_embedding_backlog below), and recall is
--    keyword-only for each row until its turn.
-- 2. No approximate vector index. Recall reads one user's rows (memories_primary) and
--    compares the query with every one of them: exact, never short. An HNSW or IVFFlat index
--    filters after its approximate scan, so a user's rows among a million others come back
--    short (pgvector before 0.8 has no iterative scan), and keeping an HNSW graph current
--    made each save slow (its insert dominated the save's p99).
-- 3. The full-text GIN index takes each save's entries at once (fastupdate off): a pending
--    list flushed by whichever save finds it full put tens of milliseconds on that save.
-- Vectors written before this migration have no record of their model: they are dropped here
-- and the backlog embeds their rows again with the configured embedder.

DROP INDEX IF EXISTS memories_embedding_hnsw;
ALTER TABLE memories ALTER COLUMN embedding TYPE vector USING NULL;
ALTER TABLE memories
  ADD COLUMN embedding_model text,
  ADD COLUMN embedding_dims integer,
  ADD CONSTRAINT memories_embedding_recorded CHECK (
    embedding IS NULL OR (embedding_model IS NOT NULL AND embedding_dims = vector_dims(embedding))
  );
ALTER INDEX memories_fts SET (fastupdate = off);
CREATE INDEX memories_embedding_model ON memories (embedding_model, id);

-- Rows not embedded with `model`, any team, any status: the maintenance job's backlog, in
-- index order (NULL model first). Refused to a session acting in a team, like the other
-- cross-team maintenance functions.
CREATE FUNCTION engram_embedding_backlog(model text, lim integer)
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
      WHERE m.embedding_model IS NULL ORDER BY m.id LIMIT greatest(lim, 0))
    UNION ALL
    (SELECT m.id, m.team_id, m.key, m.value FROM public.memories m
      WHERE m.embedding_model < model ORDER BY m.embedding_model, m.id LIMIT greatest(lim, 0))
    UNION ALL
    (SELECT m.id, m.team_id, m.key, m.value FROM public.memories m
      WHERE m.embedding_model > model ORDER BY m.embedding_model, m.id LIMIT greatest(lim, 0))
  ) b LIMIT greatest(lim, 0);
END
$$;

-- Store one row's embedding if the row still holds the key and value it was made from.
CREATE FUNCTION engram_set_embedding(
    p_id uuid, p_key text, p_value text, model text, vec vector)
  RETURNS boolean
  LANGUAGE plpgsql VOLATILE SECURITY DEFINER
  SET search_path = pg_catalog, public
AS $$
BEGIN
  IF coalesce(current_setting('engram.team_id', true), '') <> '' THEN
    RAISE EXCEPTION 'engram_set_embedding is for the maintenance job (no tenant)'
      USING ERRCODE = 'insufficient_privilege';
  END IF;
  UPDATE public.memories m
     SET embedding = vec, embedding_model = model, embedding_dims = vector_dims(vec)
   WHERE m.id = p_id AND m.key = p_key AND m.value = p_value;
  RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION engram_embedding_backlog(text, integer) FROM PUBLIC;
REVOKE ALL ON FUNCTION engram_set_embedding(uuid, text, text, text, vector) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION engram_embedding_backlog(text, integer) TO engram_app;
GRANT EXECUTE ON FUNCTION engram_set_embedding(uuid, text, text, text, vector) TO engram_app;

-- Embedding a row again is not a change of the memory: its version (the ETag of 0009) stays,
-- so a client's If-Match still holds after the maintenance job re-embedded the row. (tsv, a
-- generated column, is not computed yet in a BEFORE trigger.)
CREATE OR REPLACE FUNCTION engram_memory_next_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF to_jsonb(NEW) - '{embedding,embedding_model,embedding_dims,version,tsv}'::text[]
     = to_jsonb(OLD) - '{embedding,embedding_model,embedding_dims,version,tsv}'::text[] THEN
    NEW.version := OLD.version;
  ELSE
    NEW.version := OLD.version + 1;
  END IF;
  RETURN NEW;
END
$$;
