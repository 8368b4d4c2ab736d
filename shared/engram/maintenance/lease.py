"""One maintenance run at a time, by a lease (``engram.maintenance.ports.MaintenanceLease``).

Lambda may start a second run while one is going (a schedule fires during a long run, a retry
of a failed event, the frequent and the daily schedule at the same minute). Reserving a
concurrency of 1 would serialise them too, but accounts with a low concurrency quota refuse
the reservation. Instead every run first takes the lease:

* the lease lives ``ttl_ms`` = the invocation's remaining time plus ``GRACE_MS``: Lambda stops
  an invocation at its timeout, so a holder is gone before its lease can expire, and a run
  that crashed without releasing blocks the next ones only until then;
* a run that finds the lease taken does nothing but record its schedule as pending; the next
  run to take the lease runs the widest schedule among its own and the pending ones, so a
  daily sweep that collided with a frequent run is done at the next frequent one, not lost;
* when the lease store cannot be reached the run goes ahead without it (logged, reported):
  what serial runs protect is the job's cursor state, kept in the same store, and every step
  of the job is idempotent anyway (see ``docs/maintenance.md``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from engram.maintenance.models import FREQUENT
from engram.maintenance.ports import MaintenanceLease

T = TypeVar("T")

GRACE_MS = 10_000
"""Added to the run's own time limit for the lease's time to live."""

_log = logging.getLogger("engram.maintenance.lease")

LeaseState = Literal["held", "busy", "unavailable"]


@dataclass(frozen=True)
class Serialised(Generic[T]):
    """The outcome of :func:`run_serialised`: ``result`` is None when the run was skipped."""

    lease: LeaseState
    schedule: str
    """The schedule that ran (its own, widened by pending ones), or the one skipped."""
    result: T | None = None

    @property
    def skipped(self) -> bool:
        return self.lease == "busy"


def widest(schedules: Iterable[str]) -> str:
    """The schedule that covers all of ``schedules`` (any non-frequent one covers frequent)."""
    wider = sorted(s for s in schedules if s != FREQUENT)
    return wider[0] if wider else FREQUENT


def run_serialised(
    lease: MaintenanceLease, *, schedule: str, ttl_ms: int, run: Callable[[str], T]
) -> Serialised[T]:
    """``run(schedule)`` while holding the lease; see the module's docstring."""
    try:
        token = lease.acquire(ttl_ms)
    except Exception:
        _log.warning("maintenance lease unreachable; running without it", exc_info=True)
        return Serialised("unavailable", schedule, run(schedule))
    if token is None:
        try:
            lease.add_pending(schedule)
        except Exception:
            _log.warning("pending schedule %s not recorded", schedule, exc_info=True)
        _log.info("another maintenance run holds the lease; %s run skipped", schedule)
        return Serialised("busy", schedule)
    try:
        try:
            pending = lease.take_pending()
        except Exception:
            _log.warning("pending schedules unreadable", exc_info=True)
            pending = set()
        effective = widest({schedule, *pending})
        return Serialised("held", effective, run(effective))
    finally:
        try:
            lease.release(token)
        except Exception:
            _log.warning("maintenance lease not released; it expires by itself", exc_info=True)
