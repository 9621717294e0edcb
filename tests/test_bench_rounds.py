"""bench/rounds.py's verdict: the goal fails on a round that costs more than 2 API calls per
added thread, or on a thread that was not read or not answered exactly once."""

from __future__ import annotations

import collections
import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

# The benches import each other as scripts do, from their own directory.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
bench = importlib.import_module("rounds")


def made(threads: int, calls: int, *, read: int | None = None, once: int | None = None) -> Any:
    return bench.Round(
        threads=threads,
        rest=9,
        graphql=calls - 9,
        model_calls=11,
        tokens=11_000,
        sent=10_000,
        read=threads if read is None else read,
        replied_once=threads if once is None else once,
        seconds=0.1,
        operations=collections.Counter(),
    )


def test_the_goal_holds_at_two_calls_a_thread_with_every_thread_answered(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rounds = [made(1, 11), made(5, 19), made(150, 309)]
    assert bench.marginal(rounds[1], rounds[2]) == 2.0
    assert bench.verdict(rounds)
    assert capsys.readouterr().out.startswith("\nPASS: at most 2.00 API calls per added thread")


@pytest.mark.parametrize(
    "last",
    [
        made(150, 310),  # 291 calls for 145 threads: 2.01 each
        made(150, 160, read=149),  # a thread the round never took
        made(150, 160, once=149),  # a thread answered twice, or never
    ],
)
def test_the_goal_fails_on_a_dearer_thread_or_one_not_answered_once(
    last: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    assert not bench.verdict([made(1, 11), made(5, 19), last])
    assert capsys.readouterr().out.startswith("\nFAIL")
