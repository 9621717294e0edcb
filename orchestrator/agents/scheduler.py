"""The scheduler: runs every conversation that has work, never one conversation twice at once.

At start it asks the store what has work (an unfinished turn, a non-empty inbox, replies
all in), so a restart after a crash continues exactly where the store says. After that,
each committed step names the conversations it may have woken. A conversation that raises
is a failure row (bus/failures.py): it runs again only when `retry` is asked for.

A model that stays unavailable (overloaded, rate-limited, unreachable through the model's
own quick retries) is waited out instead: the conversation waits in the store (bus/waits.py)
and runs again after a backoff with jitter, for up to `Outages.horizon_s` from the first
failure; only then is it a failure, whose reason says what happened and for how long.

Each conversation runs in a task of its own, so `stop` can end a run under way (its job was
cancelled) without ending the worker that ran it.

`run_until_idle` may be given a deadline (runner mode's time limit): past it no conversation
starts a model or tool call, and an outage that lasts past it is left in the store, so the
call returns soon after the deadline with every conversation resumable where it stands.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

from orchestrator.agents.loop import Runner
from orchestrator.bus.conversations import ConversationBus
from orchestrator.bus.failures import Failure
from orchestrator.core.clock import Deadline
from orchestrator.core.errors import ModelUnavailableError

log = logging.getLogger(__name__)


@dataclass
class Outages:
    """How long a model outage is waited out, and the clock and sleep that measure it."""

    horizon_s: float = 1800.0
    first_delay_s: float = 30.0
    max_delay_s: float = 300.0
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    jitter: Callable[[], float] = field(default=random.random)

    def delay(self, attempts: int, hint: float | None) -> float:
        """Seconds before try `attempts + 1`: doubling from the first delay, jittered, at
        least the server's hint."""
        backoff = min(self.first_delay_s * 2**attempts, self.max_delay_s)
        return float(max(backoff * (0.5 + self.jitter() / 2), hint or 0.0))


class Scheduler:
    """A bounded pool of workers over a queue of conversations to run."""

    def __init__(self, bus: ConversationBus, runner: Runner, *, concurrency: int = 8) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.bus = bus
        self.runner = runner
        self.concurrency = concurrency
        self._queue: deque[str] = deque()
        self._queued: set[str] = set()
        self._running: set[str] = set()
        self._rerun: set[str] = set()
        self._ready = asyncio.Event()
        self._idle = asyncio.Event()
        self._held: dict[str, asyncio.Task[None]] = {}  # conversations waiting out an outage
        self._waited: set[str] = set()  # conversations with a wait row, until one runs through
        self._runs: dict[str, asyncio.Task[object]] = {}  # each conversation's run under way
        self._stopped: set[str] = set()  # never run again here: their job was cancelled
        self._deadline: Deadline | None = None  # while run_until_idle is given one
        self._later: set[str] = set()  # waiting out an outage past the deadline: a later run's
        self.outages = Outages()
        bus.on_wake = self.wake

    def wake(self, conversation_ids: Iterable[str]) -> None:
        """Queue conversations to be looked at; one already running is looked at again after."""
        for conversation_id in conversation_ids:
            if conversation_id in self._held or conversation_id in self._stopped | self._later:
                continue  # its timer wakes it, or it is not to run again (in this run)
            if conversation_id in self._running:
                self._rerun.add(conversation_id)
            elif conversation_id not in self._queued:
                self._queued.add(conversation_id)
                self._queue.append(conversation_id)
                self._ready.set()
                self._idle.clear()

    async def run_until_idle(
        self, job_id: int | None = None, *, deadline: Deadline | None = None
    ) -> None:
        """Resume everything the store says has work (of one job's conversations, if
        `job_id` is given: a local run spends nothing on other jobs), and return when nothing
        is left to run (a conversation waiting out a model outage is waited for).

        Past `deadline` no conversation starts a model or tool call (agents/loop.py), and an
        outage that lasts past it is left in the store for the next run to wait out."""
        self._deadline = deadline
        try:
            await self._resume(job_id)
            await self._serve(stop_when_idle=True)
        finally:
            self._deadline = None
            self._later.clear()

    async def serve(self) -> None:
        """Resume from the store, then run woken conversations until cancelled."""
        await self._resume()
        await self._serve(stop_when_idle=False)

    async def _resume(self, job_id: int | None = None) -> None:
        for wait in await self.bus.waits(job_id):
            if wait.kind == "model" and wait.wait_key not in self._held:
                self._waited.add(wait.wait_key)
                self._hold(wait.wait_key, wait.until)
        self.wake(await self.bus.runnable(job_id))

    def _hold(self, conversation_id: str, until: float) -> None:
        """Wake `conversation_id` at `until`, not before; not at all in this run when that is
        past its deadline (its wait row brings it back in the next run's `_resume`)."""
        if self._deadline is not None and until - self.outages.clock() >= self._deadline.left():
            self._later.add(conversation_id)
            return

        async def release() -> None:
            await self.outages.sleep(max(0.0, until - self.outages.clock()))
            self._held.pop(conversation_id, None)
            self.wake([conversation_id])

        self._idle.clear()
        self._held[conversation_id] = asyncio.get_running_loop().create_task(release())

    async def _serve(self, *, stop_when_idle: bool) -> None:
        self._check_idle()
        try:
            async with asyncio.TaskGroup() as group:
                workers = [group.create_task(self._worker()) for _ in range(self.concurrency)]
                if stop_when_idle:
                    await self._idle.wait()
                    for worker in workers:
                        worker.cancel()
        finally:  # stopped: what waits out an outage is found in the store next time
            for held in self._held.values():
                held.cancel()
            self._held.clear()

    async def _worker(self) -> None:
        while True:
            while not self._queue:
                self._ready.clear()
                await self._ready.wait()
            conversation_id = self._queue.popleft()
            self._queued.discard(conversation_id)
            self._running.add(conversation_id)
            try:
                await self._run_one(conversation_id)
            finally:
                self._running.discard(conversation_id)
                if conversation_id in self._rerun:
                    self._rerun.discard(conversation_id)
                    self.wake([conversation_id])
                self._check_idle()

    async def stop(self, conversation_ids: Iterable[str]) -> None:
        """Never run these conversations again in this process (their job was cancelled):
        a run under way is cancelled and waited for, a queued or waiting one dropped."""
        stopping = set(conversation_ids) - self._stopped
        self._stopped |= stopping
        for conversation_id in stopping & set(self._held):
            self._held.pop(conversation_id).cancel()
        if stopping & self._queued:
            self._queue = deque(c for c in self._queue if c not in stopping)
            self._queued -= stopping
        runs = [self._runs[c] for c in stopping if c in self._runs]
        for run in runs:
            run.cancel()
        if runs:
            await asyncio.wait(runs)
        self._check_idle()

    async def _run_one(self, conversation_id: str) -> None:
        run = asyncio.get_running_loop().create_task(
            self.runner.run(conversation_id, deadline=self._deadline)
        )
        self._runs[conversation_id] = run
        try:
            await run
        except asyncio.CancelledError:
            worker = asyncio.current_task()
            if conversation_id in self._stopped and worker is not None and not worker.cancelling():
                return  # `stop` ended this run, not the worker's own cancellation
            raise
        except ModelUnavailableError as exc:
            await self._outage(conversation_id, exc)
        except Exception as exc:  # the engine's guard: one conversation's bug stops no other
            log.exception("conversation %s failed; it waits for a retry", conversation_id)
            await self.bus.record_failure(conversation_id, f"{type(exc).__name__}: {exc}")
        else:
            if conversation_id in self._waited:  # known in memory: no read on every run
                self._waited.discard(conversation_id)
                await self.bus.end_wait(conversation_id)  # the model is back
        finally:
            self._runs.pop(conversation_id, None)

    async def _outage(self, conversation_id: str, exc: ModelUnavailableError) -> None:
        """Wait the outage out in the store, or past the horizon, fail saying so."""
        at = self.outages.clock()
        prior = await self.bus.wait_of(conversation_id)
        since = at if prior is None else prior.since
        if at - since >= self.outages.horizon_s:
            minutes = (at - since) / 60
            await self.bus.end_wait(conversation_id)
            self._waited.discard(conversation_id)
            reason = f"the model stayed unavailable for {minutes:.0f} min: {exc}"
            log.error("conversation %s: %s", conversation_id, reason)
            await self.bus.record_failure(conversation_id, reason)
            return
        attempts = 0 if prior is None else prior.attempts
        delay = self.outages.delay(attempts, exc.retry_after)
        until = min(at + delay, since + self.outages.horizon_s)
        log.warning("conversation %s: %s; trying again in %.0f s", conversation_id, exc, until - at)
        await self.bus.wait(
            conversation_id, job_id=None, kind="model", reason=str(exc), at=at, until=until
        )
        self._waited.add(conversation_id)
        self._hold(conversation_id, until)

    async def failures(self, job_id: int | None = None) -> list[Failure]:
        """The failures of one job, or with no job every failure in the store."""
        return await self.bus.failures(job_id)

    async def retry(self, job_id: int) -> list[Failure]:
        """Forget a job's failures and run its failed conversations again; what was retried."""
        cleared = await self.bus.clear_failures(job_id)
        self.wake(f.failure_key for f in cleared if f.kind == "conversation")
        return cleared

    def _check_idle(self) -> None:
        if not self._queue and not self._running and not self._held:
            self._idle.set()
