"""The in-process event bus: typed lifecycle events for status comments, logs and dashboards.

It is never the source of truth: events are published after the store has committed the
fact they report, and a subscriber that falls behind loses events rather than slowing the
engine. Each subscriber has its own bounded queue and its own task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal

from orchestrator.core.messages import Usage

log = logging.getLogger(__name__)

ConversationState = Literal["running", "parked", "idle", "awaiting_input", "closed", "failed"]


@dataclass(frozen=True)
class JobStarted:
    """A job was created."""

    job_id: int
    title: str


@dataclass(frozen=True)
class DispatchStarted:
    """A Send opened or continued a conversation."""

    parent_id: str
    conversation_id: str
    initiator: str
    recipient: str
    queued: bool


@dataclass(frozen=True)
class DispatchCompleted:
    """A recipient's turn ended and its reply reached the sender."""

    parent_id: str
    conversation_id: str
    recipient: str


@dataclass(frozen=True)
class GateAsked:
    """A question went to a human."""

    gate_id: int
    conversation_id: str
    kind: str
    question: str


@dataclass(frozen=True)
class GateAnswered:
    """A human (or the proxy) answered a gate."""

    gate_id: int
    conversation_id: str
    answered_by: str
    via: str


@dataclass(frozen=True)
class UsageRecorded:
    """One model call's token usage."""

    conversation_id: str
    agent: str
    usage: Usage


@dataclass(frozen=True)
class StateChanged:
    """A conversation changed state."""

    conversation_id: str
    state: ConversationState


Event = (
    JobStarted
    | DispatchStarted
    | DispatchCompleted
    | GateAsked
    | GateAnswered
    | UsageRecorded
    | StateChanged
)
Handler = Callable[[Event], Awaitable[None]]


class Subscription:
    """One subscriber: a bounded queue drained by its own task."""

    def __init__(self, handler: Handler, *, maxsize: int) -> None:
        self.handler = handler
        self.queue: asyncio.Queue[Event] = asyncio.Queue(maxsize)
        self.dropped = 0
        self.task = asyncio.create_task(self._drain())

    async def _drain(self) -> None:
        while True:
            event = await self.queue.get()
            try:
                await self.handler(event)
            except Exception:
                log.exception("event subscriber %r failed on %r", self.handler, event)
            finally:
                self.queue.task_done()


class EventBus:
    """Publish without waiting; each subscriber consumes at its own pace."""

    def __init__(self, *, queue_size: int = 1000) -> None:
        self._queue_size = queue_size
        self._subscriptions: list[Subscription] = []

    def subscribe(self, handler: Handler) -> Subscription:
        """Start delivering events to `handler` (must be called inside a running loop)."""
        subscription = Subscription(handler, maxsize=self._queue_size)
        self._subscriptions.append(subscription)
        return subscription

    def publish(self, event: Event) -> None:
        """Hand `event` to every subscriber; a full subscriber drops it and counts the drop."""
        for subscription in self._subscriptions:
            try:
                subscription.queue.put_nowait(event)
            except asyncio.QueueFull:
                subscription.dropped += 1
                if subscription.dropped == 1 or subscription.dropped % 1000 == 0:
                    log.warning(
                        "event subscriber %r is behind; %d events dropped",
                        subscription.handler,
                        subscription.dropped,
                    )

    async def drain(self) -> None:
        """Wait until every subscriber has handled what it was given."""
        await asyncio.gather(*(s.queue.join() for s in self._subscriptions))

    async def close(self) -> None:
        """Stop every subscriber task."""
        for subscription in self._subscriptions:
            subscription.task.cancel()
        for subscription in self._subscriptions:
            with contextlib.suppress(asyncio.CancelledError):
                await subscription.task
        self._subscriptions.clear()
