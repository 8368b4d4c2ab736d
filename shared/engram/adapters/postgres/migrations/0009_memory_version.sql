-- Optimistic concurrency on memories: every row carries a version, one more with every
-- change of the row, whoever makes it (an edit, a review, an upsert of the same key, a
-- proposal refreshing a pending row, retention). The API sends it as the memory's ETag, and
-- an edit with an If-Match that no longer matches changes nothing. A trigger keeps it, so no
-- writer can forget to.

ALTER TABLE memories ADD COLUMN version bigint NOT NULL DEFAULT 1;

CREATE FUNCTION engram_memory_next_version() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  NEW.version := OLD.version + 1;
  RETURN NEW;
END
$$;

CREATE TRIGGER memories_version BEFORE UPDATE ON memories
  FOR EACH ROW EXECUTE FUNCTION engram_memory_next_version();
