-- One key however it is spelt: the unique index the service's writes upsert against.
--
-- Before this SQL, engram.adapters.postgres.key_merge (run by engram migrate as this
-- migration's first step) has set key_canonical, with the service's rule, on every row whose
-- key is not already canonical,
-- recorded each row's current state as its first version, and merged the rows whose keys now
-- name one memory. memories_dedup (exact keys, which the previous release's upserts name)
-- stays beside this index until the release after this one.

CREATE UNIQUE INDEX memories_key
  ON memories (team_id, scope, owner_id, COALESCE(user_id, ''), COALESCE(key_canonical, key));
