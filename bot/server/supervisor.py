"""The serving process's background work, supervised: a worker that dies is restarted, and said.

Each worker (the scheduler, the delivery worker, the sweep) runs in one task group. One
that raises is logged with its traceback and restarted after a backoff (1 s doubling to
60 s); after `MAX_RESTARTS` restarts within `WINDOW_S` it is declared failed and left
stopped, and `/healthz` answers 503 naming it and its last error. A worker that returns
is treated like one that raised: background work is meant to run until cancelled.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

log = logging.getLogger(__name__)

MAX_RESTARTS = 5
WINDOW_S = 600.0
BACKOFF_FIRST_S = 1.0
BACKOFF_CAP_S = 60.0

WorkerState = Literal["starting", "running", "restarting", "failed", "stopped"]
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class WorkerHealth:
    """What one supervised worker is doing, as /healthz reports it."""

    name: str
    state: WorkerState = "starting"
    restarts: int = 0
    last_error: str | None = None
    _recent: deque[float] = field(default_factory=deque, repr=False)

    def report(self) -> dict[str, object]:
        """The JSON /healthz shows."""
        return {"state": self.state, "restarts": self.restarts, "last_error": self.last_error}


class Supervisor:
    """Runs named workers until cancelled, restarting each one that dies."""

    def __init__(
        self,
        *,
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        max_restarts: int = MAX_RESTARTS,
        window_s: float = WINDOW_S,
    ) -> None:
        self._sleep = sleep
        self._clock = clock
        self._max_restarts = max_restarts
        self._window_s = window_s
        self._workers: dict[str, Callable[[], Awaitable[None]]] = {}
        self.health: dict[str, WorkerHealth] = {}

    def add(self, name: str, work: Callable[[], Awaitable[None]]) -> None:
        """Supervise `work()` under `name` from the next `run`."""
        self._workers[name] = work
        self.health[name] = WorkerHealth(name)

    @property
    def failed(self) -> list[WorkerHealth]:
        """The workers that died too often and are left stopped."""
        return [h for h in self.health.values() if h.state == "failed"]

    async def run(self) -> None:
        """Run every worker until cancelled; a failed one stays stopped while the rest go on."""
        try:
            async with asyncio.TaskGroup() as group:
                for name, work in self._workers.items():
                    group.create_task(self._keep(self.health[name], work), name=name)
        finally:
            for health in self.health.values():
                if health.state != "failed":
                    health.state = "stopped"

    async def _keep(self, health: WorkerHealth, work: Callable[[], Awaitable[None]]) -> None:
        while True:
            health.state = "running"
            try:
                await work()
                error = "returned; background work should run until cancelled"
                log.error("worker %s %s", health.name, error)
            except Exception as exc:  # the supervisor's guard: a dead worker is restarted
                error = f"{type(exc).__name__}: {exc}"
                log.exception("worker %s died", health.name)
            health.last_error = error
            if not self._may_restart(health):
                health.state = "failed"
                log.error(
                    "worker %s failed %d times within %.0f s; left stopped: %s",
                    health.name,
                    self._max_restarts + 1,
                    self._window_s,
                    error,
                )
                return
            health.state = "restarting"
            health.restarts += 1
            await self._sleep(_backoff(len(health._recent)))

    def _may_restart(self, health: WorkerHealth) -> bool:
        at = self._clock()
        recent = health._recent
        while recent and at - recent[0] > self._window_s:
            recent.popleft()
        if len(recent) >= self._max_restarts:
            return False
        recent.append(at)
        return True


def _backoff(restarts_in_window: int) -> float:
    return float(min(BACKOFF_CAP_S, BACKOFF_FIRST_S * 2 ** (restarts_in_window - 1)))
