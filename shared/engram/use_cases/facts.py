"""``GET /v1/facts`` and ``DELETE /v1/facts/{factId}``: the caller's behavioural facts."""

from __future__ import annotations

from engram.behaviour.models import Fact
from engram.behaviour.service import BehaviourService
from engram.errors import NotFound
from engram.identity import Caller


class FactsService:
    def __init__(self, behaviour: BehaviourService) -> None:
        self.behaviour = behaviour

    def list(self, caller: Caller) -> list[Fact]:
        """The caller's active facts, best ranked first, with their current confidence."""
        return self.behaviour.list_facts(caller.identity_id)

    def forget(self, caller: Caller, fact_id: str) -> None:
        """Forget one of the caller's facts; ``NotFound`` when the caller has no such fact."""
        if not self.behaviour.forget_fact(caller.identity_id, fact_id):
            raise NotFound("fact not found")
