"""Every constant and formula of the built-in decay strategies."""

from __future__ import annotations

import math

import pytest
from tests.support.facts import make_fact

from engram import AdaptiveDecay, ExponentialDecay, Fact
from engram.behaviour.decay import days_until_expiry, half_life_days
from engram.clock import MS_PER_DAY

T0 = 1_767_225_600_000


def fact(confidence: float, *, ease: float | None = None, count: int = 1) -> Fact:
    return make_fact("tool_affinity:x", confidence=confidence, count=count, at=T0, ease_factor=ease)


def first_expired_day(decay: ExponentialDecay, f: Fact) -> int:
    day = 0
    while decay.apply(f, T0 + day * MS_PER_DAY) >= decay.expiry_threshold:
        day += 1
    return day


def test_half_life_is_about_13_5_days() -> None:
    assert half_life_days() == pytest.approx(13.51, abs=0.01)
    d = ExponentialDecay()
    assert d.apply(fact(1.0), T0 + int(13.5134 * MS_PER_DAY)) == pytest.approx(0.5, abs=1e-3)


def test_exponential_formula_is_confidence_times_095_pow_days() -> None:
    d = ExponentialDecay()
    assert d.apply(fact(0.8), T0 + 10 * MS_PER_DAY) == pytest.approx(0.8 * 0.95**10)
    assert d.apply(fact(0.8), T0) == 0.8
    assert d.apply(fact(0.8), T0 - MS_PER_DAY) == 0.8  # never grows with clock skew


def test_new_fact_expires_after_about_31_idle_days_and_a_max_fact_after_about_45() -> None:
    d = ExponentialDecay()
    assert days_until_expiry(0.5) == pytest.approx(31.4, abs=0.1)
    assert days_until_expiry(1.0) == pytest.approx(44.9, abs=0.1)
    assert first_expired_day(d, fact(0.5)) == 32
    assert first_expired_day(d, fact(1.0)) == 45
    assert d.expiry_threshold == 0.1


def test_reinforcement_adds_0_1_caps_at_1_and_counts() -> None:
    d = ExponentialDecay()
    r = d.reinforce(fact(0.5, count=3), now=T0 + 5)
    assert r.confidence == pytest.approx(0.6)
    assert r.reinforcement_count == 4
    assert r.last_reinforced_at == T0 + 5
    assert d.reinforce(fact(0.95), now=T0).confidence == 1.0
    assert d.reinforce(fact(1.0), now=T0).confidence == 1.0


def test_apply_does_not_change_the_stored_confidence() -> None:
    d = ExponentialDecay()
    f = fact(0.9)
    d.apply(f, T0 + 30 * MS_PER_DAY)
    assert f.confidence == 0.9


@pytest.mark.parametrize(("quality", "delta"), [(1.0, 0.1), (0.67, 0.0), (0.0, -0.2)])
def test_adaptive_ease_moves_with_quality(quality: float, delta: float) -> None:
    d = AdaptiveDecay()
    r = d.reinforce(fact(0.5, ease=2.5), quality, now=T0)
    assert r.ease_factor == pytest.approx(2.5 + delta, abs=0.002)


def test_adaptive_ease_has_a_floor_of_1_3_and_starts_at_2_5() -> None:
    d = AdaptiveDecay()
    assert d.reinforce(fact(0.5, ease=1.35), 0.0, now=T0).ease_factor == 1.3
    assert d.reinforce(fact(0.5, ease=1.3), 0.0, now=T0).ease_factor == 1.3
    assert d.new_fact_ease() == 2.5
    assert d.reinforce(fact(0.5), 1.0, now=T0).ease_factor == pytest.approx(2.6)


def test_adaptive_formula_divides_days_by_ease() -> None:
    d = AdaptiveDecay()
    now = T0 + 20 * MS_PER_DAY
    assert d.apply(fact(0.8, ease=2.5), now) == pytest.approx(0.8 * 0.95 ** (20 / 2.5))
    assert d.apply(fact(0.8), now) == pytest.approx(0.8 * 0.95 ** (20 / 2.5))
    # effective half-lives: 13.5 x 2.5 = 33.75 days, 13.5 x 1.3 = 17.55 days
    for ease, half in ((2.5, 33.78), (1.3, 17.57)):
        t = T0 + int(half * MS_PER_DAY)
        assert d.apply(fact(1.0, ease=ease), t) == pytest.approx(0.5, abs=2e-3)
    assert math.isclose(half_life_days() * 2.5, 33.78, abs_tol=0.01)
