"""Background work is supervised: a dead worker restarts; one that keeps dying makes healthz 503."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from app_harness import until
from fakes import SteppingClock

from bot.handlers.payloads import HANDLED_EVENTS
from bot.server.endpoint import create_app
from bot.server.supervisor import Supervisor
from bot.server.worker import DeliveryWorker
from orchestrator.store.deliveries import Delivery, DeliveryQueue
from orchestrator.store.sqlite import Store


class BrokenQueue(DeliveryQueue):
    """The store under the worker fails every read (a full disk, a broken file)."""

    async def due(self, *, limit: int = 50) -> list[Delivery]:
        raise sqlite3.OperationalError("disk I/O error")


async def never(delivery: Delivery) -> tuple[str, int | None]:
    raise AssertionError("no delivery should reach the handler")


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "teaparty.db")
    yield opened
    await opened.close()


async def test_a_worker_that_dies_once_is_restarted_and_reported() -> None:
    clock, started = SteppingClock(), asyncio.Event()
    runs = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs == 1:
            raise RuntimeError("first run breaks")
        started.set()
        await asyncio.Event().wait()

    supervisor = Supervisor(sleep=clock.sleep, clock=clock)
    supervisor.add("flaky", flaky)
    running = asyncio.create_task(supervisor.run())
    await asyncio.wait_for(started.wait(), 5)
    health = supervisor.health["flaky"]
    assert (health.state, health.restarts) == ("running", 1)
    assert health.last_error == "RuntimeError: first run breaks"
    assert clock.slept == [1.0]
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert health.state == "stopped"


async def test_restarts_back_off_and_stop_after_five_in_ten_minutes() -> None:
    clock = SteppingClock()

    async def broken() -> None:
        raise RuntimeError("always")

    supervisor = Supervisor(sleep=clock.sleep, clock=clock)
    supervisor.add("broken", broken)
    await asyncio.wait_for(supervisor.run(), 5)  # returns: the only worker gave up
    health = supervisor.health["broken"]
    assert (health.state, health.restarts) == ("failed", 5)
    assert clock.slept == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert [h.name for h in supervisor.failed] == ["broken"]


async def test_failures_spread_over_more_than_ten_minutes_keep_restarting() -> None:
    clock, reached = SteppingClock(), asyncio.Event()
    runs = 0

    async def slow_to_break() -> None:
        nonlocal runs
        runs += 1
        if runs > 8:
            reached.set()
            await asyncio.Event().wait()
        clock.now += 300.0  # five minutes of good work before each failure
        raise RuntimeError(f"failure {runs}")

    supervisor = Supervisor(sleep=clock.sleep, clock=clock)
    supervisor.add("slow", slow_to_break)
    running = asyncio.create_task(supervisor.run())
    await asyncio.wait_for(reached.wait(), 5)
    assert supervisor.health["slow"].state == "running"
    assert supervisor.health["slow"].restarts == 8
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running


async def test_a_delivery_worker_that_keeps_dying_turns_healthz_to_503(store: Store) -> None:
    clock = SteppingClock()
    supervisor = Supervisor(sleep=clock.sleep, clock=clock)
    worker = DeliveryWorker(BrokenQueue(store), never)
    supervisor.add("deliveries", worker.run)
    supervisor.add("sweep", asyncio.Event().wait)
    app = create_app(
        DeliveryQueue(store), secret="s", events=HANDLED_EVENTS, workers=lambda: supervisor.health
    )
    running = asyncio.create_task(supervisor.run())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        await until(lambda: supervisor.health["deliveries"].state == "failed", what="failed")
        answer = await http.get("/healthz")
    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running
    assert answer.status_code == 503
    report = answer.json()
    assert report["ok"] is False
    assert report["workers"]["deliveries"] == {
        "state": "failed",
        "restarts": 5,
        "last_error": "OperationalError: disk I/O error",
    }
    assert report["workers"]["sweep"]["state"] == "running"
    assert "deliveries (OperationalError: disk I/O error)" in report["error"]
    assert report["pending_deliveries"] == 0
