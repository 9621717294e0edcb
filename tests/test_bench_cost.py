"""bench/cost.py: its billing against hand-computed tokens, and a one-task job run through it."""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
from pathlib import Path
from typing import Any

import pytest

from orchestrator.config.prices import shipped_prices
from orchestrator.core.messages import AssistantTurn, Message, ToolCall, Usage
from orchestrator.core.model import ModelRequest
from orchestrator.core.tools import ToolSpec

# The benches import each other as scripts do, from their own directory.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
cost = importlib.import_module("cost")

SONNET = shipped_prices().price("claude-sonnet-4-6")
_UNIQUE = itertools.count()


def block(tokens: int, *, mark: bool = False, key: str = "") -> Any:
    """A block of `tokens`; blocks with the same key are the same content."""
    return cost.Block(key or f"block {next(_UNIQUE)}", tokens, mark)


def test_a_conversation_reads_what_it_wrote_and_writes_only_what_is_new() -> None:
    tools, system = block(300, mark=True, key="tools"), block(800, mark=True, key="system")
    first = [tools, system, block(100, mark=True, key="brief")]
    cache = cost.PromptCache(minimum=1024)
    # tools alone (300) are under the minimum; tools+system (1,100) and the whole are stored.
    assert cache.bill(first) == Usage(0, 0, 0, 1200)
    second = [*first[:2], block(100, key="brief"), block(50, key="call"), block(60, mark=True)]
    assert cache.bill(second) == Usage(0, 0, 1200, 110)
    # Another conversation with the same tools and system reads them and writes its own.
    other = [tools, system, block(200, mark=True)]
    assert cache.bill(other) == Usage(0, 0, 1100, 200)
    assert cache.bill(other) == Usage(0, 0, 1300, 0)


def test_a_prefix_under_the_minimum_is_billed_as_input() -> None:
    cache = cost.PromptCache(minimum=2048)
    request = [block(300, mark=True), block(800, mark=True), block(100, mark=True)]
    assert cache.bill(request) == Usage(1200, 0, 0, 0)
    assert cache.bill(request) == Usage(1200, 0, 0, 0)


def test_more_than_twenty_new_blocks_miss_the_conversation_and_fall_back_to_system() -> None:
    head = [block(300, mark=True, key="tools"), block(800, mark=True, key="system")]
    brief = block(100, key="brief")
    cache = cost.PromptCache(minimum=1024)
    cache.bill([*head, cost.Block(brief.key, 100, True)])
    results = [block(10, key=f"result {n}") for n in range(20)]
    wide = [*head, brief, *results, block(10, mark=True, key="last")]  # 21 blocks after brief
    assert cache.bill(wide) == Usage(0, 0, 1100, 100 + 200 + 10)
    narrow = [*head, brief, *results[:19], block(10, mark=True, key="one")]  # 20 after
    assert cache.bill(narrow) == Usage(0, 0, 1200, 200)


def test_blocks_and_output_are_counted_from_the_api_body() -> None:
    spec = ToolSpec("shell", "Run it.", {"type": "object"})
    request = ModelRequest(
        "a/implementer",
        "s" * 4000,
        (
            Message("c", 1, "lead", "user", {"text": "u" * 401, "kind": "request"}),
            Message("c", 2, "w", "assistant", {"text": "", "tool_calls": []}),
        ),
        (spec,),
    )
    blocks = cost.blocks_of(request)
    tool = '{"name": "shell", "description": "Run it.", "input_schema": {"type": "object"}}'
    assert [b.tokens for b in blocks] == [-(-len(tool) // 4), 1000, 101]
    assert [b.breakpoint for b in blocks] == [True, True, True]
    reply = AssistantTurn(text="abcd" * 10, tool_calls=(ToolCall("x", "shell", {"command": "ls"}),))
    assert cost.output_tokens(reply) == 10 + -(-len('shell{"command": "ls"}') // 4)


async def test_two_tasks_are_billed_on_both_sides_as_the_cache_works(tmp_path: Path) -> None:
    measured = await cost.measure(2, tmp_path, price=SONNET, min_cache=1024)
    roles = measured.roles
    assert set(roles) == {
        "project-lead", "implementer", "spec review", "quality review", "phase review",
    }, "the office manager's turns added nothing: the engine made them"  # fmt: skip
    assert sum((b.usage for b in roles.values()), Usage()) == measured.hierarchy.usage
    # The flat agent makes the workers' turns (four a task) with the same replies...
    flat, worker = measured.flat, roles["implementer"]
    assert flat.calls == worker.calls == 8
    assert flat.usage.output_tokens == worker.usage.output_tokens
    # ...and each of its requests extends the last by a few blocks: each token is written
    # once, and read by every later call.
    flat_calls = list(cost.flat_requests(measured.log))
    sizes = [sum(b.tokens for b in cost.blocks_of(request)) for request, _ in flat_calls]
    assert flat.usage == Usage(0, flat.usage.output_tokens, sum(sizes[:-1]), sizes[-1])
    assert measured.flat_context == sizes[-1]
    assert flat.usd == pytest.approx(SONNET.cost_usd(flat.usage))
    # Task 2 starts after task 1's verdicts, from its brief without the mini-team's part.
    given = [m.text for m in flat_calls[4][0].messages]
    assert given[0].startswith("Job: widgets issue")
    assert sum(text.startswith("spec review of task #1: approve") for text in given) == 1
    assert sum(text.startswith("quality review of task #1: approve") for text in given) == 1
    assert given[-1].startswith("Task #2: Add clamp_2\n\nSpec:\nAdd `clamp_2")
    assert not any("mini-team" in text for text in given)


async def test_the_report_prints_both_sides_and_the_crossover(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    options = argparse.Namespace(
        sizes=[1, 2], model="claude-sonnet-4-6", min_cache=1024, search=True, review="full"
    )
    assert await cost.main(options)  # no enforced goal at these sizes: nothing missed
    out = capsys.readouterr().out
    assert "hierarchy" in out
    assert "flat" in out
    assert (
        "crossover (smallest task count where the hierarchy is cheaper): not reached up to 2" in out
    )


def measured(tasks: int, ratio: float) -> Any:
    spent = cost.Bill(Usage(), 1.0, 1)
    return cost.Measured(tasks, cost.Bill(Usage(), ratio, 1), spent, {}, None, 0, 0.0)


async def test_the_crossover_is_searched_between_the_sizes_measured() -> None:
    ran: list[int] = []

    async def run(tasks: int) -> Any:
        ran.append(tasks)
        return measured(tasks, 1.5 - tasks / 20)  # cheaper from 11 tasks

    found = {5: measured(5, 1.25), 20: measured(20, 0.5)}
    where = await cost.crossover(found, run, search=True)
    assert where.startswith("11 tasks (searched; hierarchy/flat at 10: 1.00, 11: 0.95)")
    assert ran == [12, 8, 10, 11]
    found = {5: measured(5, 1.25), 20: measured(20, 0.5)}
    assert "about 10.0 tasks (interpolated" in await cost.crossover(found, run, search=False)
    assert "not reached up to 5 tasks" in await cost.crossover({5: found[5]}, run, search=True)
