"""Time as the engine reads it: an injectable clock, and a deadline on it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

Clock = Callable[[], float]
"""Seconds since the epoch, injectable so waits can be tested without waiting."""


@dataclass(frozen=True)
class Deadline:
    """When a run stops starting work (runner mode's time limit), on the caller's clock."""

    at: float
    clock: Clock

    def passed(self) -> bool:
        """Whether it has come."""
        return self.clock() >= self.at

    def left(self) -> float:
        """Seconds until it comes; negative once it has."""
        return self.at - self.clock()
