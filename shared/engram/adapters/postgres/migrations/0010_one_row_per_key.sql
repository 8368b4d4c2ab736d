-- One row per key again, so the upserts of the release before 0007 keep working during a
-- deploy.
--
-- 0007 replaced the unique index memories_dedup by a partial one (WHERE status <> 'rejected')
-- so that a rejected row and a new value of its key could both be rows. An upsert whose
-- ON CONFLICT names the key's columns without that predicate -- every save and proposal of
-- the release before 0007 -- then finds no arbiter index and fails, and such code still runs
-- while a deploy has migrated the database but not yet replaced every function. Migrations
-- are additive for the release they replace (docs/deployment.md, "Migrations during a
-- deploy"): the index goes back to covering every row.
--
-- A rejected row keeps its key until a new value of that key is saved or proposed; that
-- write deletes the rejected row in its own transaction, and the rejected value stays refused
-- by a suppression (memory_suppressions) recorded when it was rejected. So this migration
-- records a suppression for every rejected row, then deletes the rejected rows whose key is
-- also held by a live row or by a later rejected row (their audit rows stay), then rebuilds
-- the index. Statements of the release that introduced 0007 keep working too: their
-- ON CONFLICT ... WHERE status <> 'rejected' is satisfied by an index without a predicate.

-- memory_suppressions is FORCEd, which would hide the table from a non-superuser owner (RDS).
ALTER TABLE memory_suppressions NO FORCE ROW LEVEL SECURITY;
-- the digest of engram.memories.lifecycle.suppression_digest: SHA-256 of the key's UTF-8
-- length (4 bytes, big-endian), the key and the value
INSERT INTO memory_suppressions (team_id, scope, owner_id, user_key, digest, source_user_id,
                                 created_at)
SELECT m.team_id, m.scope, m.owner_id, COALESCE(m.user_id, ''),
       sha256(int4send(octet_length(convert_to(m.key, 'UTF8'))) || convert_to(m.key, 'UTF8')
              || convert_to(m.value, 'UTF8')),
       CASE WHEN m.scope = 'persona' THEN m.source_user_id END,
       m.updated_at
  FROM memories m
 WHERE m.status = 'rejected'
ON CONFLICT DO NOTHING;
ALTER TABLE memory_suppressions FORCE ROW LEVEL SECURITY;

DELETE FROM memories r
 WHERE r.status = 'rejected'
   AND EXISTS (
     SELECT 1 FROM memories o
      WHERE o.team_id = r.team_id AND o.scope = r.scope AND o.owner_id = r.owner_id
        AND COALESCE(o.user_id, '') = COALESCE(r.user_id, '') AND o.key = r.key
        AND o.id <> r.id
        AND (o.status <> 'rejected' OR (o.updated_at, o.id) > (r.updated_at, r.id)));

DROP INDEX memories_dedup;
CREATE UNIQUE INDEX memories_dedup
  ON memories (team_id, scope, owner_id, COALESCE(user_id, ''), key);
-- memories_rejected (0007) has nothing left to find that memories_dedup does not.
DROP INDEX memories_rejected;
