"""The engine's store between workflow runs, kept on a git ref of the repository itself.

A workflow run starts with nothing but `GITHUB_TOKEN` and the repository, so the store
(`TEAPARTY_HOME/teaparty.db`) lives in the repository, on a ref outside `refs/heads`
(`refs/teaparty/state` by default). The engine's `StoreRef` (orchestrator/api.py) does the
git: it loads the ref's commit into a home, and saves the home's store (a consistent
snapshot, pruned of jobs that ended long ago, bounded in size, with a `state.json` naming
its format, schema, time and run) as a commit whose parent is the one loaded, pushed without
force. What is here is the runner's policy on top of it.

**Compare-and-swap.** A run loads the ref's commit (`Loaded.base`) and saves a commit whose
parent is that one: if another run pushed first, the push is not a fast-forward and the
remote refuses it; that is a `StateRaceError`, and `StateRef.apply_with_retries` loads the
newer state and applies the run's event again (events are deduplicated by delivery id in
the store, so applying one twice is harmless). No run can overwrite another's state.

**Who can read it.** Anyone with read access to the repository can fetch this ref (a public
repository's state is public). The store holds no secret: tokens, keys and webhook secrets
are never written to it (tests/test_app_e2e.py checks the store of a whole App run), and the
`auth` header given here is passed to git in the environment of the one command that needs
it, never in its arguments, configuration, or the commit.

Its errors and records are in `state_records.py`.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from bot.runner.state_records import (
    Applied,
    StateBusyError,
    StateError,
    StateFormatError,
    StateRaceError,
    StateTooLargeError,
)
from orchestrator.api import Loaded, StateInfo, StoreRef

__all__ = [
    "DEFAULT_REF",
    "FORMAT",
    "IDENTITY",
    "MAX_BYTES",
    "Applied",
    "Loaded",
    "StateBusyError",
    "StateError",
    "StateFormatError",
    "StateInfo",
    "StateRaceError",
    "StateRef",
    "StateTooLargeError",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
FORMAT = StoreRef.FORMAT  # of the commit's layout and state.json; a newer one is refused
DEFAULT_REF = StoreRef.DEFAULT_REF
MAX_BYTES = StoreRef.MAX_BYTES  # GitHub warns about files over 50 MiB and refuses 100 MiB
IDENTITY = StoreRef.IDENTITY
BACKOFF_S = 1.0
BACKOFF_CAP_S = 30.0


class StateRef(StoreRef):
    """The state of one repository on one ref (the engine's `StoreRef`: `load`, `save`,
    `remote_commit`), and the runner's way through a lost race: load, apply and save again.
    """

    async def apply_with_retries(
        self,
        home: Path,
        apply: Callable[[Path], Awaitable[T]],
        *,
        message: str = "TeaParty state",
        attempts: int = 5,
        backoff: float = BACKOFF_S,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> Applied[T]:
        """Load, `await apply(home)`, save; when another run saved first, wait and do it all
        again on the newer state, up to `attempts` times (StateBusyError after that).

        `apply` must be idempotent on a state that already has its effect, and must close
        any store it opens before it returns. The wait doubles each time from `backoff`
        seconds (at most BACKOFF_CAP_S), times a random factor in [0.5, 1) so that runs
        which collided do not collide again.
        """
        if attempts < 1:
            raise StateError(f"apply_with_retries needs at least one attempt, not {attempts}")
        attempt = 0
        while True:
            attempt += 1
            loaded = await self.load(home)
            try:
                value = await apply(home)  # it may lose a race of its own (a preserve)
                commit = await self.save(home, loaded.base, message=message)
            except StateRaceError as race:
                if attempt == attempts:
                    raise StateBusyError(
                        f"gave up saving {self.where}: another run saved first on each of "
                        f"{attempts} attempts ({race})",
                        attempts=attempts,
                    ) from race
                wait = min(BACKOFF_CAP_S, backoff * 2 ** (attempt - 1)) * (0.5 + jitter() / 2)
                log.info("%s; loading again in %.1f s (attempt %d)", race, wait, attempt + 1)
                await sleep(wait)
                continue
            return Applied(value, commit, attempt)
