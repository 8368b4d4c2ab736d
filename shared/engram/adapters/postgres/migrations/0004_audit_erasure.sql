-- Erasure (DELETE /v1/me) also clears the review audit trail of the erased user: the rows
-- about their memories (which hold before/after copies of the values) are deleted, and the
-- rows where they acted on memories that stay (persona memories, other users' proposals they
-- reviewed as a team admin) keep their before/after but lose the actor id ('erased').
-- PostgresMemoryStore.erase_user does both in the transaction that deletes the memories,
-- acting as a team admin of the caller's team (the audit is visible to admins only).
GRANT DELETE, UPDATE (actor_id) ON review_actions TO engram_app;

CREATE POLICY review_actions_erase ON review_actions FOR DELETE TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on');
CREATE POLICY review_actions_pseudonymise ON review_actions FOR UPDATE TO engram_app
  USING (team_id = current_setting('engram.team_id', true)
         AND current_setting('engram.is_admin', true) = 'on')
  WITH CHECK (team_id = current_setting('engram.team_id', true));
