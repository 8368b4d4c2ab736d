"""The callers of the service tests: persona access goes by group, so Alice cooks and Bob
sells; the admins administer team t1."""

from __future__ import annotations

from engram.identity import Caller

ALICE = Caller(user_id="alice", team_id="t1", groups=frozenset({"cooks"}))
BOB = Caller(user_id="bob", team_id="t1", groups=frozenset({"sales"}))
ADMIN = Caller(user_id="root", team_id="t1", is_team_admin=True)
ADMIN2 = Caller(user_id="carol", team_id="t1", is_team_admin=True)
ALICE_T2 = Caller(user_id="alice", team_id="t2", groups=frozenset({"cooks"}))
