"""The delivery worker: takes stored deliveries in order and acts on each, with retries.

A delivery is marked done only after its handler returned, so a crash mid-way leaves it
pending and the next process handles it again (the handlers are idempotent). A bad
payload fails at once; a GitHub or git failure is retried with backoff; a rate limit
waits for its reset, and a delivery that cannot be decided yet for its moment, without
spending an attempt; a bug in a handler is logged and
retried like a failure, so it never stops the worker. Jobs a delivery touched are synced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Awaitable, Callable

from bot.errors import BotError, NotYetError, RateLimitedError
from bot.handlers.payloads import PayloadError
from orchestrator.api import Deliveries, Delivery, OrchestratorError

log = logging.getLogger(__name__)

Handler = Callable[[Delivery], Awaitable[tuple[str, int | None]]]
IDLE_POLL_S = 30.0
PRUNE_EVERY_S = 3600.0


class DeliveryWorker:
    """Works off the store's pending deliveries; `wake()` when a new one is stored."""

    def __init__(
        self,
        queue: Deliveries,
        handler: Handler,
        *,
        on_job: Callable[[int], None] = lambda _: None,
    ) -> None:
        self.queue = queue
        self.handler = handler
        self.on_job = on_job
        self._wake = asyncio.Event()
        self.handled = 0

    def wake(self) -> None:
        """A delivery was stored: look now."""
        self._wake.set()

    async def run(self) -> None:
        """Handle due deliveries until cancelled; forget old handled ones hourly."""
        pruned_at = 0.0
        while True:
            if time.time() - pruned_at > PRUNE_EVERY_S:
                await self.queue.prune()
                pruned_at = time.time()
            self._wake.clear()
            if not await self.drain():
                await self._sleep_until_due()

    async def drain(self) -> int:
        """Handle every delivery due now; how many were handled."""
        count = 0
        while batch := await self.queue.due():
            for delivery in batch:
                await self.one(delivery)
                count += 1
        return count

    async def _sleep_until_due(self) -> None:
        next_at = await self.queue.next_due_at()
        wait = IDLE_POLL_S if next_at is None else min(IDLE_POLL_S, next_at - time.time())
        timeout = max(0.0, wait)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), timeout)

    async def one(self, delivery: Delivery) -> None:
        """Handle one delivery and record what came of it."""
        did = delivery.delivery_id
        try:
            outcome, job_id = await self.handler(delivery)
        except (PayloadError, json.JSONDecodeError) as exc:
            log.warning("delivery %s (%s): bad payload: %s", did, delivery.event, exc)
            await self._failed(did, f"bad payload: {exc}", retry=False)
            return
        except RateLimitedError as exc:
            log.warning("delivery %s: rate limited; retrying after the reset", did)
            await self.queue.retry_later(did, not_before=exc.retry_at, error=str(exc))
            return
        except NotYetError as exc:
            log.info("delivery %s: %s; handled again shortly", did, exc)
            await self.queue.retry_later(did, not_before=exc.retry_at, error=str(exc))
            return
        except (BotError, OrchestratorError) as exc:
            log.warning("delivery %s (%s) failed: %s", did, delivery.event, exc)
            await self._failed(did, str(exc), retry=True)
            return
        except Exception as exc:  # the worker's guard: a bug in one handler stops no other
            log.exception("delivery %s (%s): handler raised", did, delivery.event)
            await self._failed(did, f"{type(exc).__name__}: {exc}", retry=True)
            return
        await self.queue.done(did, outcome=outcome)
        self.handled += 1
        log.info("delivery %s %s.%s: %s", did, delivery.event, delivery.action, outcome)
        if job_id is not None:
            self.on_job(job_id)

    async def _failed(self, delivery_id: str, error: str, *, retry: bool) -> None:
        again = await self.queue.failed_attempt(delivery_id, error=error, retry=retry)
        if not again:
            log.error("delivery %s failed for good: %s", delivery_id, error)
