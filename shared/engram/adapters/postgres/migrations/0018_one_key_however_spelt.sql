-- One key however it is spelt: the unique index the service's writes upsert against.
--
-- Before this SQL, engram.adapters.postgres.key_merge (run by engram migrate as this
-- migration's first step) has computed every row's key_canonical with the service's rule,
-- recorded each row's current state as its first version, and merged the rows whose keys now
-- name one memory. memories_dedup (exact keys, which the previous release's upserts name)
-- stays beside this index until the release after this one.

CREATE UNIQUE INDEX memories_key
  ON memories (team_id, scope, owner_id, COALESCE(user_id, ''), key_canonical);
-- a row the previous release inserts gets its identity from engram_memory_key_canonical
-- before this constraint is checked
ALTER TABLE memories ALTER COLUMN key_canonical SET NOT NULL;
