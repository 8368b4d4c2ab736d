"""``engram demo``: a few sessions of behavioural memory, printed as they evolve.

Uses the Redis at ``REDIS_URL`` / ``ENGRAM_REDIS_URL`` when set (under its own key prefix),
otherwise an embedded in-process Redis (fakeredis). A fake clock walks days forward so decay
is visible.
"""

from __future__ import annotations

import argparse
import uuid

from engram.behaviour.commands import QueryAsked, ToolRan
from engram.behaviour.models import Fact
from engram.bootstrap import Container
from engram.clock import FakeClock
from engram.settings import Settings

IDENTITY = "demo-team:demo-user"


def _look_up_acme(*, duration_ms: int) -> ToolRan:
    """The account lookup the user starts two sessions with."""
    return ToolRan(
        tool_name="get_account",
        ok=True,
        duration_ms=duration_ms,
        result={"id": "A-1", "name": "Acme"},
    )


# (day, events) — what the user did in each session
SESSIONS: list[tuple[int, list[QueryAsked | ToolRan]]] = [
    (
        0,
        [
            QueryAsked(text="What royalties did Acme earn last quarter?"),
            _look_up_acme(duration_ms=42),
            ToolRan(tool_name="run_royalty_report", ok=True, duration_ms=900),
            ToolRan(tool_name="run_royalty_report", ok=True, duration_ms=850),
        ],
    ),
    (
        2,
        [
            QueryAsked(text="Show the contract terms for Acme"),
            _look_up_acme(duration_ms=40),
            ToolRan(
                tool_name="search_snowflake_schema",
                ok=False,
                duration_ms=3000,
                error="warehouse suspended",
            ),
        ],
    ),
    (
        5,
        [
            QueryAsked(text="Which products by ISRC drove revenue?"),
            ToolRan(
                tool_name="get_products_by_isrc",
                ok=True,
                duration_ms=120,
                result={"products": [{"isrc": "USRC17607839", "title": "Night Drive"}]},
            ),
            ToolRan(tool_name="run_royalty_report", ok=True, duration_ms=870),
            ToolRan(
                tool_name="search_snowflake_schema", ok=False, duration_ms=3000, error="timeout"
            ),
        ],
    ),
    (
        40,
        [
            QueryAsked(text="Royalty statement for Acme, please"),
            ToolRan(tool_name="run_royalty_report", ok=True, duration_ms=880),
        ],
    ),
]


def _show_facts(facts: list[Fact]) -> None:
    if not facts:
        print("  (no facts yet)")
    for f in facts:
        print(
            f"  {f.subject:<48} confidence {f.confidence:.3f}  reinforced {f.reinforcement_count}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="engram demo", description=__doc__)
    parser.add_argument("--quiet", action="store_true", help="print only the final state")
    args = parser.parse_args(argv)

    prefix = f"engram-demo-{uuid.uuid4().hex[:8]}"
    settings = Settings().model_copy(update={"redis_key_prefix": prefix})
    where = settings.redis_url or "embedded Redis (fakeredis, in-process)"
    clock = FakeClock()
    container = Container(settings, clock=clock)
    service = container.behaviour
    start = clock.now_ms()
    print(f"Engram behavioural memory demo on {where}\n")
    try:
        for day, events in SESSIONS:
            clock.set(start + day * 86_400_000)
            load = service.load(IDENTITY)  # session start: consolidate what came before
            if not args.quiet:
                print(f"=== day {day}: session start ===")
                _show_facts(load.facts)
                if load.prompt_section:
                    print("\n" + "\n".join("  | " + ln for ln in load.prompt_section.splitlines()))
                if load.tool_affinities:
                    aff = ", ".join(
                        f"{k} {v:+.2f}" for k, v in sorted(load.tool_affinities.items())
                    )
                    print(f"\n  tool affinities: {aff}")
                print(f"\n  ... the user works: {len(events)} events\n")
            observations = service.observations_from_events(
                IDENTITY, events, now_ms=clock.now_ms(), batch_id=f"day-{day}"
            )
            service.record(IDENTITY, observations)
        clock.set(start + 41 * 86_400_000)
        final = service.load(IDENTITY)
        print("=== day 41: final state ===")
        _show_facts(final.facts)
        print("\n" + final.prompt_section)
        return 0
    finally:
        service.erase(IDENTITY)
        container.close()
