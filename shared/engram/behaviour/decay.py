"""Confidence decay strategies: how a fact's confidence fades between reinforcements.

Stored confidence is the strength as of ``last_reinforced_at``; ``apply`` computes the current
confidence from it and never persists anything.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

from engram.behaviour.models import Fact
from engram.clock import MS_PER_DAY

BASE_DECAY = 0.95
REINFORCE_AMOUNT = 0.1
EXPIRY_THRESHOLD = 0.1
MAX_CONFIDENCE = 1.0
NEW_FACT_CONFIDENCE = 0.5
DEFAULT_EASE = 2.5
MIN_EASE = 1.3


@runtime_checkable
class DecayStrategy(Protocol):
    @property
    def expiry_threshold(self) -> float: ...

    def apply(self, fact: Fact, now: int) -> float:
        """Current confidence of ``fact`` at epoch ms ``now``."""
        ...

    def reinforce(self, fact: Fact, quality: float = 1.0, *, now: int) -> Fact:
        """The fact after one reinforcement at ``now`` (stored confidence + 0.1, capped)."""
        ...

    def new_fact_ease(self) -> float | None:
        """The ease factor a new fact starts with (None when the strategy has none)."""
        ...


def _days(fact: Fact, now: int) -> float:
    return max(0.0, (now - fact.last_reinforced_at) / MS_PER_DAY)


def half_life_days(base: float = BASE_DECAY) -> float:
    """ln(0.5) / ln(base): about 13.5 days for 0.95."""
    return math.log(0.5) / math.log(base)


def days_until_expiry(
    confidence: float, *, threshold: float = EXPIRY_THRESHOLD, base: float = BASE_DECAY
) -> float:
    """Idle days until ``confidence`` decays below ``threshold`` (ExponentialDecay)."""
    return math.log(threshold / confidence) / math.log(base)


class ExponentialDecay:
    """``confidence × 0.95^days`` (the default)."""

    def __init__(
        self,
        *,
        base_decay: float = BASE_DECAY,
        reinforce_amount: float = REINFORCE_AMOUNT,
        expiry_threshold: float = EXPIRY_THRESHOLD,
    ) -> None:
        self.base_decay = base_decay
        self.reinforce_amount = reinforce_amount
        self._expiry_threshold = expiry_threshold

    @property
    def expiry_threshold(self) -> float:
        return self._expiry_threshold

    def _exponent(self, fact: Fact, now: int) -> float:
        return _days(fact, now)

    def apply(self, fact: Fact, now: int) -> float:
        value: float = fact.confidence * self.base_decay ** self._exponent(fact, now)
        return value

    def factor(self, idle_ms: int, ease_factor: float | None) -> float:
        """The decay multiplier after ``idle_ms`` without reinforcement (numbers only: the
        consolidation hot path caches it per distinct (idle_ms, ease))."""
        value: float = self.base_decay ** (max(0.0, idle_ms / MS_PER_DAY))
        return value

    def reinforced_values(
        self, confidence: float, ease_factor: float | None, quality: float
    ) -> tuple[float, float | None]:
        """(stored confidence, ease factor) after one reinforcement (numbers only)."""
        return min(MAX_CONFIDENCE, confidence + self.reinforce_amount), ease_factor

    def reinforce(self, fact: Fact, quality: float = 1.0, *, now: int) -> Fact:
        confidence, ease = self.reinforced_values(fact.confidence, fact.ease_factor, quality)
        return fact.evolve(
            confidence=confidence,
            reinforcement_count=fact.reinforcement_count + 1,
            last_reinforced_at=now,
            updated_at=now,
            ease_factor=ease,
        )

    def new_fact_ease(self) -> float | None:
        return None


class AdaptiveDecay(ExponentialDecay):
    """SM-2 inspired: ``confidence × 0.95^(days / easeFactor)``; ease moves with quality."""

    def __init__(
        self,
        *,
        default_ease: float = DEFAULT_EASE,
        min_ease: float = MIN_EASE,
        base_decay: float = BASE_DECAY,
        reinforce_amount: float = REINFORCE_AMOUNT,
        expiry_threshold: float = EXPIRY_THRESHOLD,
    ) -> None:
        super().__init__(
            base_decay=base_decay,
            reinforce_amount=reinforce_amount,
            expiry_threshold=expiry_threshold,
        )
        self.default_ease = default_ease
        self.min_ease = min_ease

    def ease_of(self, fact: Fact) -> float:
        return self._ease(fact.ease_factor)

    def _ease(self, ease_factor: float | None) -> float:
        return ease_factor if ease_factor is not None else self.default_ease

    def next_ease(self, ease: float, quality: float) -> float:
        q = min(1.0, max(0.0, quality))
        return max(self.min_ease, ease + 0.1 - (1.0 - q) * 0.3)

    def _exponent(self, fact: Fact, now: int) -> float:
        return _days(fact, now) / self.ease_of(fact)

    def factor(self, idle_ms: int, ease_factor: float | None) -> float:
        ease = self._ease(ease_factor)
        value: float = self.base_decay ** (max(0.0, idle_ms / MS_PER_DAY) / ease)
        return value

    def reinforced_values(
        self, confidence: float, ease_factor: float | None, quality: float
    ) -> tuple[float, float | None]:
        return (
            min(MAX_CONFIDENCE, confidence + self.reinforce_amount),
            self.next_ease(self._ease(ease_factor), quality),
        )

    def new_fact_ease(self) -> float | None:
        return self.default_ease


def numeric_decay(decay: object) -> ExponentialDecay | None:
    """``decay`` when its ``apply`` and ``reinforce`` are exactly those of the two built-in
    strategies (so ``factor`` and ``reinforced_values`` compute the same numbers); None for
    any other strategy, which the callers then drive through the ``DecayStrategy`` methods."""
    cls = type(decay)
    if cls is ExponentialDecay or cls is AdaptiveDecay:
        return decay  # type: ignore[return-value]
    if not isinstance(decay, ExponentialDecay):
        return None
    base = AdaptiveDecay if isinstance(decay, AdaptiveDecay) else ExponentialDecay
    for name in ("apply", "reinforce", "_exponent", "factor", "reinforced_values", "ease_of"):
        if getattr(cls, name, None) is not getattr(base, name, None):
            return None
    return decay


def decay_from_name(name: str) -> DecayStrategy:
    """``"exponential"`` or ``"adaptive"`` (``Settings.decay``)."""
    if name == "exponential":
        return ExponentialDecay()
    if name == "adaptive":
        return AdaptiveDecay()
    raise ValueError(f"unknown decay strategy {name!r}")
