"""Benchmark of the turn loop's own overhead and of context size under delegation.

    python bench/agents.py [--quick]

1. Overhead: a worker that makes N model turns of K tool calls each (a zero-latency model,
   an in-memory ToolRunner), run as a whole job through Engine on a real store file
   (WAL, synchronous=FULL). Reports ms per turn and per tool call beside raw aiosqlite
   INSERT+COMMIT, one per persisted step (an assistant message, each tool result).
2. Context: a lead Sends T tasks one after another to fresh workers that each read three
   files and reply with a paragraph; the peak estimated context of worker and lead, beside
   a single flat agent doing the same T tasks in one conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiosqlite

from orchestrator.agents.context import estimate_tokens
from orchestrator.agents.engine import Engine
from orchestrator.agents.ports import AgentSpec
from orchestrator.agents.tools import BUS_SPECS
from orchestrator.bus.routing import Router, Team
from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult
from orchestrator.core.model import ModelRequest
from orchestrator.core.tools import ToolSpec
from orchestrator.models.scripted import FunctionModel

LEAD, WORKER, FLAT = "p/lead", "p/w/worker", "p/flat"
READ_FILE = ToolSpec("read_file", "Read a file of the worktree.", {"type": "object"})
TOOLS = (*BUS_SPECS.values(), READ_FILE)
FILE_TEXT = ("def handler(event):\n    return process(event.payload)  # line of source\n" * 40)[
    :2000
]
PARAGRAPH = (
    "Done: the handler now validates the payload before processing it, the two call sites "
    "pass the parsed event, and the new test covers an empty payload and a malformed one. "
    "No other module reads this field. I ran the module's tests and they pass; one flaky "
    "network test was skipped as before. Nothing is left open on this task; the diff is on "
    "the task branch, ready for review."
)[:400]
READS_PER_TASK = 3


@dataclass
class Agents:
    """Every address runs one model with the bus tools and read_file; compaction is off."""

    model: FunctionModel
    max_turns: int = 40

    def spec(self, address: str) -> AgentSpec:
        system = f"You are {address}. Do the work you are sent and reply with the result."
        return AgentSpec(address, system, TOOLS, self.model, self.max_turns, 10**9)


@dataclass
class InstantTools:
    """A ToolRunner that answers every call at once with a fixed text."""

    output: str
    ran: int = 0

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        self.ran += 1
        return ToolResult(call.call_id, self.output)


@dataclass
class Recorder:
    """Estimated tokens of every request, per agent."""

    peaks: dict[str, int] = field(default_factory=dict)
    calls: dict[str, int] = field(default_factory=dict)

    def note(self, request: ModelRequest) -> None:
        self.calls[request.agent] = self.calls.get(request.agent, 0) + 1
        tokens = estimate_tokens(request.messages) + len(request.system) // 4
        self.peaks[request.agent] = max(self.peaks.get(request.agent, 0), tokens)


async def run_job(
    path: Path,
    fn: Callable[[ModelRequest], AssistantTurn],
    *,
    agent: str,
    tools: InstantTools,
    brief: str = "go",
    max_turns: int = 40,
) -> float:
    """Seconds from start_job until the scheduler is idle, on a fresh store."""
    router = Router([Team(LEAD, (WORKER,))])
    model = FunctionModel(fn)
    engine = await Engine.open(path, agents=Agents(model, max_turns), router=router, tools=tools)
    started = time.perf_counter()
    await engine.bus.start_job(job_key="k", project="p", title="t", agent=agent, brief=brief)
    await engine.scheduler.run_until_idle()
    elapsed = time.perf_counter() - started
    failed = await engine.scheduler.failures()
    assert not failed, failed
    await engine.close()
    return elapsed


# --- 1. overhead ---------------------------------------------------------------------------


async def loop_job(path: Path, turns: int, per_turn: int) -> float:
    """A worker taking `turns` turns of `per_turn` tool calls, then finishing."""

    def fn(request: ModelRequest) -> AssistantTurn:
        done = sum(1 for m in request.messages if m.role == "assistant")
        if done >= turns:
            return AssistantTurn(text="finished")
        calls = tuple(
            ToolCall(f"t{done}.{i}", "read_file", {"path": "a.py"}) for i in range(per_turn)
        )
        return AssistantTurn(tool_calls=calls)

    tools = InstantTools("ok: 12 lines")
    elapsed = await run_job(path, fn, agent=WORKER, tools=tools, max_turns=turns + 10)
    assert tools.ran == turns * per_turn
    return elapsed


async def raw_inserts(path: Path, n: int) -> float:
    """Baseline: n INSERT + COMMIT through aiosqlite, WAL, synchronous=FULL."""
    async with aiosqlite.connect(path) as db:
        await db.execute("PRAGMA journal_mode=WAL")
        await db.execute("PRAGMA synchronous=FULL")
        await db.execute("CREATE TABLE m (id INTEGER PRIMARY KEY, conv TEXT, body TEXT)")
        await db.commit()
        started = time.perf_counter()
        for _ in range(n):
            await db.execute("INSERT INTO m (conv, body) VALUES (?, ?)", ("c", "ok: 12 lines"))
            await db.commit()
        return time.perf_counter() - started


async def per_turn(fresh: Iterator[Path], repeats: int, turns: int, calls: int) -> float:
    """Seconds per turn of a `turns`-turn job with `calls` tool calls a turn (median)."""
    runs = [await loop_job(next(fresh), turns, calls) for _ in range(repeats)]
    return statistics.median(runs) / turns


async def overhead(fresh: Iterator[Path], repeats: int, quick: bool) -> None:
    # A turn that calls no tool ends the job, so every turn calls at least one: the per-turn
    # and per-tool costs come from two shapes of the same length, K=1 and K=8, with
    # t = N * (turn + K * tool).
    n = 50
    one = await per_turn(fresh, repeats, n, 1)
    eight = await per_turn(fresh, repeats, n, 8)
    tool = (eight - one) / 7
    turn = one - tool
    raw = statistics.median([await raw_inserts(next(fresh), 1000) for _ in range(repeats)]) / 1000
    print(f"{'loop overhead, ms':<50}{'loop':>10}{'baseline':>10}{'ratio':>8}")
    rows = [
        (f"turn with 1 tool call (N={n} turns)", one, 2 * raw),
        (f"turn with 8 tool calls (N={n} turns)", eight, 9 * raw),
        ("  per turn (model call and its steps)", turn, raw),
        ("  per tool call (marginal)", tool, raw),
    ]
    for longer in (200,) if quick else (200, 800):
        seconds = await per_turn(fresh, repeats, longer, 1)
        rows.append((f"turn with 1 tool call (N={longer} turns)", seconds, 2 * raw))
    for label, loop_s, base_s in rows:
        print(f"{label:<50}{loop_s * 1e3:>10.3f}{base_s * 1e3:>10.3f}{loop_s / base_s:>8.2f}")
    print(
        "  loop: wall time of the whole job through Engine / N (zero-latency model, in-memory"
        "\n  tools). baseline: raw aiosqlite INSERT+COMMIT, one per persisted step (the assistant"
        "\n  message, each tool result). The loop commits a turn in two transactions (the"
        "\n  assistant message; its tool results together), so a tool call has no fsync of its"
        "\n  own."
    )


# --- 2. context ----------------------------------------------------------------------------


def task_brief(i: int) -> str:
    return (
        f"Task {i}: in module m{i}.py, make the handler validate its payload before "
        f"processing; read m{i}.py, its caller and its test, then report what you changed."
    )


def job_brief(tasks: int) -> str:
    """The job's brief, the same for the lead and the flat agent: every task, in order."""
    return f"Do these {tasks} tasks in order:\n" + "\n".join(
        task_brief(i) for i in range(1, tasks + 1)
    )


def worker_turn(task: int, reads_done: int) -> AssistantTurn:
    """Read files until READS_PER_TASK are read, then the paragraph."""
    if reads_done < READS_PER_TASK:
        return AssistantTurn(
            tool_calls=(ToolCall(f"r{task}.{reads_done}", "read_file", {"path": f"m{task}.py"}),)
        )
    return AssistantTurn(text=PARAGRAPH)


def tool_messages(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "tool")


async def delegated(path: Path, tasks: int) -> tuple[int, int]:
    """Peak (worker, lead) context of a lead sending `tasks` tasks in turn to fresh workers."""
    recorder = Recorder()

    def fn(request: ModelRequest) -> AssistantTurn:
        recorder.note(request)
        if request.agent == WORKER:
            return worker_turn(0, tool_messages(request))
        replies = tool_messages(request)
        if replies >= tasks:
            return AssistantTurn(text=f"All {tasks} tasks done.")
        send = {"member": "worker", "message": task_brief(replies + 1)}
        return AssistantTurn(tool_calls=(ToolCall(f"s{replies}", "send", send),))

    brief = job_brief(tasks)
    tools = InstantTools(FILE_TEXT)
    await run_job(path, fn, agent=LEAD, tools=tools, brief=brief, max_turns=tasks + 10)
    assert recorder.calls[LEAD] == tasks + 1, recorder.calls  # every task sent and answered
    assert tools.ran == tasks * READS_PER_TASK
    return recorder.peaks[WORKER], recorder.peaks[LEAD]


async def flat(path: Path, tasks: int) -> int:
    """Peak context of one agent doing the same tasks itself, in one conversation."""
    recorder = Recorder()

    def fn(request: ModelRequest) -> AssistantTurn:
        recorder.note(request)
        reads = tool_messages(request)
        task, done = divmod(reads, READS_PER_TASK)
        if task < tasks:
            turn = worker_turn(task, done)
            # The result paragraph of the task before rides on the first read of the next.
            text = PARAGRAPH if done == 0 and task > 0 else ""
            return AssistantTurn(text=text, tool_calls=turn.tool_calls)
        return AssistantTurn(text=PARAGRAPH)

    brief = job_brief(tasks)
    max_turns = tasks * (READS_PER_TASK + 1) + 10
    await run_job(
        path, fn, agent=FLAT, tools=InstantTools(FILE_TEXT), brief=brief, max_turns=max_turns
    )
    assert recorder.calls[FLAT] == tasks * READS_PER_TASK + 1, recorder.calls
    return recorder.peaks[FLAT]


async def context(fresh: Iterator[Path], quick: bool) -> None:
    sizes = (1, 5, 10, 20) if quick else (1, 5, 10, 20, 50)
    print()
    header = f"{'worker':>10}{'lead':>10}{'flat':>10}{'flat/worker':>13}"
    print(f"{'peak context, est. tokens':<28}{header}")
    for tasks in sizes:
        worker, lead = await delegated(next(fresh), tasks)
        single = await flat(next(fresh), tasks)
        label = f"T={tasks} tasks"
        print(f"{label:<28}{worker:>10,}{lead:>10,}{single:>10,}{single / worker:>13.1f}")
    print(
        f"  each task: {READS_PER_TASK} reads of {len(FILE_TEXT):,} chars and a"
        f" {len(PARAGRAPH)}-char result;"
        "\n  tokens = estimate_tokens(request.messages) + len(system)//4, compaction off."
        "\n  worker: a fresh worker per task; lead: Sends the tasks in turn; both lead and flat"
        "\n  get the same job brief listing every task;"
        "\n  flat: one agent doing every task in one conversation (no Send)."
    )


async def main(quick: bool) -> None:
    repeats = 1 if quick else 3
    with tempfile.TemporaryDirectory() as tmp:
        fresh = iter(Path(tmp) / f"{i}.db" for i in range(10_000))
        await overhead(fresh, repeats, quick)
        await context(fresh, quick)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="one repeat, smaller jobs")
    asyncio.run(main(parser.parse_args().quick))
