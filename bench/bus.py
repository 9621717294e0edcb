"""Benchmark of the conversation bus against raw aiosqlite inserts, measured in one run.

    python bench/bus.py [--quick]

Prints committed messages/s (sequential and 16 concurrent writers), the Send->reply
round trip, and fan-in time for 10/100/1000 children, each beside its baseline: raw
aiosqlite INSERT+COMMIT with the same durability settings (WAL, synchronous=FULL).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import aiosqlite

from orchestrator.agents.engine import Engine
from orchestrator.agents.ports import AgentSpec
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.bus.routing import Router, Team
from orchestrator.core.messages import AssistantTurn, InboxKind, ToolCall
from orchestrator.core.model import ModelRequest

LEAD, WORKER = "p/lead", "p/w/worker"
BODY = "x" * 1024  # a 1 KB message, like a short brief or reply


class ZeroLatencyModel:
    """A model that answers instantly from the request (the bus is all that is measured)."""

    def __init__(self, fn: Callable[[ModelRequest], AssistantTurn]) -> None:
        self.fn = fn

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        return self.fn(request)


class Agents:
    def __init__(self, model: ZeroLatencyModel) -> None:
        self.model = model

    def spec(self, address: str) -> AgentSpec:
        return AgentSpec(address, "", tuple(BUS_SPECS.values()), self.model)


async def engine_with(path: Path, fn: Callable[[ModelRequest], AssistantTurn]) -> Engine:
    router = Router([Team(LEAD, (WORKER,), mesh=True)])
    return await Engine.open(path, agents=Agents(ZeroLatencyModel(fn)), router=router)


async def raw_inserts(path: Path, n: int, writers: int) -> float:
    """Baseline: one INSERT + COMMIT per message through aiosqlite's public API."""
    async with aiosqlite.connect(path) as db:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, conv TEXT, body TEXT)")
        await db.commit()
        lock = asyncio.Lock()

        async def writer(count: int) -> None:
            for _ in range(count):
                async with lock:  # one connection: a transaction at a time
                    await db.execute("INSERT INTO m (conv, body) VALUES (?, ?)", ("c", BODY))
                    await db.commit()

        return await timed(lambda: gather(writer, n, writers))


async def bus_posts(path: Path, n: int, writers: int) -> float:
    """The bus: each message delivered to an inbox and committed (state check + insert)."""
    engine = await engine_with(path, lambda r: AssistantTurn(text="ok"))
    start = await engine.bus.start_job(job_key="k", project="p", title="t", agent=LEAD, brief="b")

    async def writer(count: int) -> None:
        for _ in range(count):
            await engine.bus.post(
                start.conversation_id, kind=InboxKind.MESSAGE, sender="bench", text=BODY
            )

    elapsed = await timed(lambda: gather(writer, n, writers))
    await engine.close()
    return elapsed


async def gather(writer: Callable[[int], Awaitable[None]], n: int, writers: int) -> None:
    await asyncio.gather(*(writer(n // writers) for _ in range(writers)))


async def timed(fn: Callable[[], Awaitable[None]]) -> float:
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


async def round_trips(path: Path, n: int) -> float:
    """A lead that Sends to a worker, waits for the reply, and Sends again, n times."""

    def fn(request: ModelRequest) -> AssistantTurn:
        if request.agent == WORKER:
            return AssistantTurn(text="done")
        sent = sum(1 for m in request.messages if m.role == "tool")
        if sent >= n:
            return AssistantTurn(text="finished")
        return AssistantTurn(tool_calls=(send(f"s{sent}", BODY),))

    engine = await engine_with(path, fn)
    elapsed = await timed(lambda: run_job(engine))
    await engine.close()
    return elapsed / n


async def fan_in(path: Path, children: int) -> tuple[float, int]:
    """A lead that Sends to `children` workers in one turn; time until its final reply."""

    def fn(request: ModelRequest) -> AssistantTurn:
        if request.agent == WORKER:
            return AssistantTurn(text="part done")
        if len(request.messages) == 1:
            return AssistantTurn(tool_calls=tuple(send(f"c{i}", BODY) for i in range(children)))
        return AssistantTurn(text=f"{len(request.messages) - 2} replies")

    engine = await engine_with(path, fn)
    elapsed = await timed(lambda: run_job(engine))
    count = await engine.store.read(
        lambda tx: tx.execute("SELECT count(*) FROM messages").fetchone()[0]
    )
    await engine.close()
    return elapsed, count


def send(call_id: str, body: str) -> ToolCall:
    return ToolCall(call_id, "send", {"member": "worker", "message": body})


async def run_job(engine: Engine) -> None:
    await engine.bus.start_job(job_key="k", project="p", title="t", agent=LEAD, brief="go")
    await engine.scheduler.run_until_idle()
    failed = await engine.scheduler.failures()
    assert not failed, failed


def median(values: list[float]) -> float:
    return statistics.median(values)


async def main(quick: bool) -> None:
    repeats = 1 if quick else 3
    n = 1000 if quick else 4000
    with tempfile.TemporaryDirectory() as tmp:
        fresh = iter(Path(tmp) / f"{i}.db" for i in range(10_000))
        print(f"{'measure':<44}{'bus':>12}{'baseline':>12}{'ratio':>8}")
        for writers in (1, 16):
            raw = median([n / await raw_inserts(next(fresh), n, writers) for _ in range(repeats)])
            bus = median([n / await bus_posts(next(fresh), n, writers) for _ in range(repeats)])
            label = f"committed messages/s, {writers} writer(s)"
            print(f"{label:<44}{bus:>12,.0f}{raw:>12,.0f}{bus / raw:>8.2f}")
        raw_ms = 1000 / median([n / await raw_inserts(next(fresh), n, 1) for _ in range(repeats)])
        trip = median([await round_trips(next(fresh), 200) for _ in range(repeats)]) * 1000
        print(
            f"{'Send->reply round trip, ms (vs 1 raw insert)':<44}{trip:>12.2f}{raw_ms:>12.3f}"
            f"{trip / raw_ms:>8.1f}"
        )
        for children in (10, 100, 1000):
            runs = [await fan_in(next(fresh), children) for _ in range(repeats)]
            elapsed = median([r[0] for r in runs])
            messages = runs[0][1]
            raw = messages * raw_ms / 1000
            label = f"fan-in of {children} children, s ({messages} msgs)"
            print(f"{label:<44}{elapsed:>12.3f}{raw:>12.3f}{elapsed / raw:>8.2f}")
        print("baseline for fan-in: the same number of messages as raw single inserts")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one repeat, fewer messages")
    asyncio.run(main(parser.parse_args().quick))
