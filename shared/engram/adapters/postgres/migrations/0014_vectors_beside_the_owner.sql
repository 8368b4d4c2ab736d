-- Hybrid recall reads one user's vectors from an index, not from the table.
--
-- Recall compares the query with every vector of the caller's visible rows (exact). A user's
-- rows lie all over the table, so reading their vectors from the heap costs one random page
-- per row: at a million rows that was most of a hybrid recall's time. This index keeps each
-- owner's vectors side by side, with every column the vector list and row-level security read,
-- so the list is an index-only scan over a few contiguous pages.
--
-- A B-tree entry holds at most about 2,700 bytes, so the index takes vectors of up to 512
-- dimensions (2 KB); rows of a larger embedder (Titan at 1,024) are read from the table as
-- before. Recall names the query's dimension as a constant so the planner can match the
-- index's predicate.

CREATE INDEX memories_vectors
  ON memories (team_id, owner_id, scope, embedding_model)
  INCLUDE (user_id, confidence, key, id, embedding)
  WHERE status = 'active' AND embedding IS NOT NULL AND embedding_dims <= 512;
