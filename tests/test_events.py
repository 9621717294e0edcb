"""The event bus: ordered delivery, and a slow subscriber never blocks the publisher."""

from __future__ import annotations

import asyncio

from orchestrator.bus.events import Event, EventBus, JobStarted, StateChanged


async def test_events_reach_every_subscriber_in_order() -> None:
    bus = EventBus()
    seen: list[Event] = []

    async def record(event: Event) -> None:
        seen.append(event)

    bus.subscribe(record)
    events: list[Event] = [
        JobStarted(1, "t"),
        StateChanged("job:1", "running"),
        StateChanged("job:1", "idle"),
    ]
    for event in events:
        bus.publish(event)
    await bus.drain()
    assert seen == events
    await bus.close()


async def test_a_stuck_subscriber_drops_events_instead_of_blocking() -> None:
    bus = EventBus(queue_size=50)
    stuck = asyncio.Event()
    fast: list[Event] = []

    async def never_returns(event: Event) -> None:
        await stuck.wait()

    async def record(event: Event) -> None:
        fast.append(event)

    slow = bus.subscribe(never_returns)
    bus.subscribe(record)
    for n in range(200):
        bus.publish(JobStarted(n, "t"))  # never awaits, however slow a subscriber is
        await asyncio.sleep(0)  # the engine goes on working; the fast subscriber keeps up
    assert len(fast) == 200
    assert slow.dropped == 200 - 51  # one in its handler, fifty queued
    await bus.close()


async def test_a_failing_subscriber_is_logged_and_keeps_receiving() -> None:
    bus = EventBus()
    calls: list[int] = []

    async def flaky(event: Event) -> None:
        calls.append(1)
        raise ValueError("subscriber bug")

    bus.subscribe(flaky)
    bus.publish(JobStarted(1, "t"))
    bus.publish(JobStarted(2, "t"))
    await bus.drain()
    assert len(calls) == 2
    await bus.close()
