"""The state ref's errors and records: what `load`, `save` and `apply_with_retries` return.

The errors, rooted at bot.errors.BotError:

StateError              the state ref cannot be loaded or saved (git's words included)
 ├── StateRaceError     another run moved the ref since it was loaded
 ├── StateBusyError     every attempt of apply_with_retries lost the race
 ├── StateFormatError   the ref holds state this teaparty cannot read (newer, or not ours)
 └── StateTooLargeError the snapshot is over the size bound
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Generic, TypeVar

from bot.errors import BotError

T = TypeVar("T")
INFO_FILE = "state.json"


class StateError(BotError):
    """The state ref cannot be loaded or saved."""


class StateRaceError(StateError):
    """Another run moved the state ref from `base` (what this run loaded) to `found`."""

    def __init__(self, message: str, *, base: str | None, found: str | None) -> None:
        super().__init__(message)
        self.base = base
        self.found = found


class StateBusyError(StateError):
    """Every one of `attempts` attempts lost the race to another run."""

    def __init__(self, message: str, *, attempts: int) -> None:
        super().__init__(message)
        self.attempts = attempts


class StateFormatError(StateError):
    """The ref holds state this teaparty cannot read."""


class StateTooLargeError(StateError):
    """The snapshot (`size` bytes) is over the bound (`limit` bytes)."""

    def __init__(self, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.size = size
        self.limit = limit


@dataclass(frozen=True)
class StateInfo:
    """What `state.json` says of a saved state."""

    format: int
    schema: int
    saved_at: str
    run: str

    def to_json(self) -> str:
        """The file's text."""
        return json.dumps(self.__dict__, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, *, where: str) -> StateInfo:
        """Parse `state.json`; StateFormatError when it is not one of ours."""
        try:
            raw = json.loads(text)
            info = cls(
                int(raw["format"]), int(raw["schema"]), str(raw["saved_at"]), str(raw["run"])
            )
        except (ValueError, TypeError, KeyError) as exc:
            raise StateFormatError(f"{where}: {INFO_FILE} is not TeaParty state ({exc})") from exc
        return info


@dataclass(frozen=True)
class Loaded:
    """What `load` found: the commit loaded (None: no state yet, a first run) and its info."""

    base: str | None
    info: StateInfo | None = None


@dataclass(frozen=True)
class Applied(Generic[T]):
    """What `apply_with_retries` did: the value `apply` returned on the attempt that was
    saved, the commit the ref now names, and how many attempts it took."""

    value: T
    commit: str
    attempts: int
