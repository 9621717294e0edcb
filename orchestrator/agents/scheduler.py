"""The scheduler: runs every conversation that has work, never one conversation twice at once.

At start it asks the store what has work (an unfinished turn, a non-empty inbox, replies
all in), so a restart after a crash continues exactly where the store says. After that,
each committed step names the conversations it may have woken. A conversation that raises
is a failure row (bus/failures.py): it runs again only when `retry` is asked for.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable

from orchestrator.agents.loop import Runner
from orchestrator.bus.conversations import ConversationBus
from orchestrator.bus.failures import Failure

log = logging.getLogger(__name__)


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
        bus.on_wake = self.wake

    def wake(self, conversation_ids: Iterable[str]) -> None:
        """Queue conversations to be looked at; one already running is looked at again after."""
        for conversation_id in conversation_ids:
            if conversation_id in self._running:
                self._rerun.add(conversation_id)
            elif conversation_id not in self._queued:
                self._queued.add(conversation_id)
                self._queue.append(conversation_id)
                self._ready.set()
                self._idle.clear()

    async def run_until_idle(self) -> None:
        """Resume everything the store says has work, and return when nothing is left to run."""
        self.wake(await self.bus.runnable())
        await self._serve(stop_when_idle=True)

    async def serve(self) -> None:
        """Resume from the store, then run woken conversations until cancelled."""
        self.wake(await self.bus.runnable())
        await self._serve(stop_when_idle=False)

    async def _serve(self, *, stop_when_idle: bool) -> None:
        self._check_idle()
        async with asyncio.TaskGroup() as group:
            workers = [group.create_task(self._worker()) for _ in range(self.concurrency)]
            if stop_when_idle:
                await self._idle.wait()
                for worker in workers:
                    worker.cancel()

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

    async def _run_one(self, conversation_id: str) -> None:
        try:
            await self.runner.run(conversation_id)
        except Exception as exc:  # the engine's guard: one conversation's bug stops no other
            log.exception("conversation %s failed; it waits for a retry", conversation_id)
            await self.bus.record_failure(conversation_id, f"{type(exc).__name__}: {exc}")

    async def failures(self, job_id: int | None = None) -> list[Failure]:
        """The failures of one job, or with no job every failure in the store."""
        return await self.bus.failures(job_id)

    async def retry(self, job_id: int) -> list[Failure]:
        """Forget a job's failures and run its failed conversations again; what was retried."""
        cleared = await self.bus.clear_failures(job_id)
        self.wake(f.failure_key for f in cleared if f.kind == "conversation")
        return cleared

    def _check_idle(self) -> None:
        if not self._queue and not self._running:
            self._idle.set()
