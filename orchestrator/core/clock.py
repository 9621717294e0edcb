"""Time as the engine reads it: an injectable clock, and a deadline on it."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
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


# The deadline of the run a conversation's turn is part of, while the runner makes that turn
# (agents/loop.py): a model that makes more than one call for a turn looks at it between them.
RUN_DEADLINE: ContextVar[Deadline | None] = ContextVar("run_deadline", default=None)


def run_deadline_passed() -> bool:
    """Whether the turn under way belongs to a run whose deadline has come."""
    deadline = RUN_DEADLINE.get()
    return deadline is not None and deadline.passed()
