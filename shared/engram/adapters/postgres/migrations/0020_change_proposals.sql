-- Change proposals: a value the extraction job learnt for a key whose memory is active with
-- another value waits here, beside the memory, for a reviewer (it never replaces the row, so
-- memories keeps one row per key). A memory has at most one pending change; decided ones stay
-- (approved or rejected) until the memory is deleted, so a second decision finds it decided.
CREATE TABLE memory_changes (
  id                uuid PRIMARY KEY,
  team_id           text NOT NULL,
  memory_id         uuid NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
  value             text NOT NULL,
  confidence        real NOT NULL,
  source_user_id    text,
  source_channel_id text,
  status            text NOT NULL DEFAULT 'pending'
                    CHECK (status IN ('pending', 'approved', 'rejected')),
  created_at        timestamptz NOT NULL,
  updated_at        timestamptz NOT NULL
);
CREATE UNIQUE INDEX memory_changes_pending ON memory_changes (memory_id) WHERE status = 'pending';
CREATE INDEX memory_changes_memory ON memory_changes (memory_id);
-- the review queue, newest first, and an erasure's changes learnt from the user
CREATE INDEX memory_changes_queue ON memory_changes (team_id, created_at DESC, id DESC)
  WHERE status = 'pending';
CREATE INDEX memory_changes_source ON memory_changes (team_id, source_user_id);

-- A change is visible and writable exactly where its memory is (the memories policies apply
-- inside this one).
ALTER TABLE memory_changes ENABLE ROW LEVEL SECURITY;
CREATE POLICY memory_changes_of_memory ON memory_changes FOR ALL TO engram_app
USING (
  team_id = current_setting('engram.team_id', true)
  AND EXISTS (SELECT 1 FROM memories m WHERE m.id = memory_id)
)
WITH CHECK (
  team_id = current_setting('engram.team_id', true)
  AND EXISTS (SELECT 1 FROM memories m WHERE m.id = memory_id)
);
GRANT SELECT, INSERT, UPDATE, DELETE ON memory_changes TO engram_app;
