"""``POST /v1/tools/rank``: the caller's tool catalogue ordered by relevance plus affinity.

Each candidate's score gets ``affinity × 2`` added (``engram.behaviour.affinity``), the
affinity being what the caller's facts say of that tool now. Ranking reads the facts as the
last session start consolidated them, with their confidence decayed to now, and does not
consolidate: consolidation is where a session reinforces its facts (once per session), so
consolidating at every ranking would count each ranking as a session. Observations recorded
since the last session start count from the next one. One read of the behaviour store; when
it is down, the candidates are ranked by their scores alone (every affinity 0) and the
answer says ``behaviour:unavailable`` — ranking never fails because Redis does.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from engram.behaviour.affinity import BOOST_FACTOR, RankedTool, extract_tool_affinities
from engram.behaviour.affinity import rank_candidates as _rank
from engram.behaviour.commands import RankTools
from engram.behaviour.service import BehaviourService
from engram.errors import Unavailable
from engram.identity import Caller
from engram.use_cases.session import BEHAVIOUR_UNAVAILABLE

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolRanking:
    tools: list[RankedTool]
    boost_factor: float = BOOST_FACTOR
    degraded: list[str] = field(default_factory=list)


def rank_tools(behaviour: BehaviourService, caller: Caller, command: RankTools) -> ToolRanking:
    """The command's ``(name, score)`` candidates, best first, with the affinity used for
    each."""
    candidates = command.candidates
    try:
        affinities = extract_tool_affinities(behaviour.list_facts(caller.identity_id))
    except Unavailable:
        log.warning("tool ranking without affinities: the behaviour store is unavailable")
        return ToolRanking(_rank(candidates, {}), degraded=[BEHAVIOUR_UNAVAILABLE])
    return ToolRanking(_rank(candidates, affinities))
