"""The state ref's errors, and what `apply_with_retries` returns (what `load` finds is the
engine's `Loaded`).

The errors are the engine's (orchestrator/api.py, raised by its `StoreRef`), rooted at
OrchestratorError, and the runner's own give-up:

StateError              the state ref cannot be loaded or saved (git's words included)
 ├── StateRaceError     another run moved the ref since it was loaded
 ├── StateBusyError     (here) every attempt of apply_with_retries lost the race
 ├── StateFormatError   the ref holds state this teaparty cannot read (newer, or not ours)
 └── StateTooLargeError the snapshot is over the size bound
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from orchestrator.api import StateError, StateFormatError, StateRaceError, StateTooLargeError

__all__ = [
    "Applied",
    "StateBusyError",
    "StateError",
    "StateFormatError",
    "StateRaceError",
    "StateTooLargeError",
]

T = TypeVar("T")


class StateBusyError(StateError):
    """Every one of `attempts` attempts lost the race to another run."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


@dataclass(frozen=True)
class Applied(Generic[T]):
    """What `apply_with_retries` did: the value `apply` returned on the attempt that was
    saved, the commit the ref now names, and how many attempts it took."""

    value: T
    commit: str
    attempts: int
