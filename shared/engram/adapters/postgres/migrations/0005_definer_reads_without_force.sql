-- The SECURITY DEFINER functions run as their owner, the migrating role. On Aurora / RDS that
-- role is not a superuser, and FORCE ROW LEVEL SECURITY applies a table's policies to its
-- owner too: engram_retention_policies (0003), which reads team_settings and personas in no
-- team, then saw no row at all and the retention step did nothing. (Tests migrating as the
-- superuser could not notice: a superuser bypasses row-level security.)
--
-- Like memories (0001) and erasures (0002), these tables keep row-level security ENABLEd
-- without FORCE: the service never acts as the owner — every transaction sets the role
-- engram_app, whose policies confine it to its tenant exactly as before — so only the owner's
-- own definer functions read across teams, returning what they are written to return.
-- review_actions stays FORCEd: no definer function reads it.
ALTER TABLE personas NO FORCE ROW LEVEL SECURITY;
ALTER TABLE team_settings NO FORCE ROW LEVEL SECURITY;
