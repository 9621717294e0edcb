"""GitHub calls per job do not grow with how long the model takes.

The demo's one-task job runs twice on the App's clock: once with an instant model, once with
a model whose every call takes a minute (simulated: the App's clock jumps, nothing sleeps),
about 20 minutes in all. The tracking comment changes on phase changes at once and
otherwise at most once a minute, so both runs make the same calls. The job's check run is
made once and completed once. The project's learnings come from the job's clone, so the
contents API is asked for the project file alone.
"""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from bot.demo import run_demo
from bot.fakehub.hub import FakeGitHub
from bot.server.catchup import PER_PROCESS_CALLS

pytestmark = pytest.mark.timeout(120)


async def calls(home: Path, model_seconds: float) -> collections.Counter[str]:
    seen: collections.Counter[str] = collections.Counter()

    def count(hub: FakeGitHub) -> None:
        seen.update(f"{r.method} {r.operation_id}" for r in hub.requests if r.auth != "none")
        read = [r.path for r in hub.requests if r.operation_id == "repos/get-content"]
        # once by the label scan on start, once by the job: never the learnings
        assert [p.rsplit("/contents/", 1)[-1] for p in read] == [".teaparty/project.yaml"] * 2

    code = await run_demo(
        home, {"PATH": os.environ["PATH"]}, inspect=count, model_seconds=model_seconds
    )
    assert code == 0
    return seen


async def test_a_slow_model_costs_no_more_github_calls_than_an_instant_one(
    tmp_path: Path,
) -> None:
    instant = await calls(tmp_path / "instant", 0.0)
    slow = await calls(tmp_path / "slow", 60.0)
    # Whether a sync sees the short step between two phases (a task in progress) is a race
    # in either run; what must not happen is edits growing with the model's 20 minutes.
    edits = "PATCH issues/update-comment"
    assert abs(slow[edits] - instant[edits]) <= 1, (slow, instant)
    assert slow[edits] <= 5, slow
    assert slow - collections.Counter({edits: slow[edits]}) == instant - collections.Counter(
        {edits: instant[edits]}
    )
    gate = instant["POST issues/create-comment"] - 1  # one lookup and one comment per gate
    # identity, and catching up on start (+ the label scan's read of the project file)
    per_process = sum(instant[f"GET {op}"] for op in PER_PROCESS_CALLS)
    per_process += instant["GET issues/list-for-repo"]
    # an answer: the decider's write access checked, and 👍 on their comment
    answers = instant["POST reactions/create-for-issue-comment"]
    assert answers == gate
    # the tracking comment's edits are bounded above (at most 5, whichever the race); the rest
    # of a job is fixed: its project file, the branch pushed and the pull request opened, and
    # its `TeaParty` check run (looked for first, in case an earlier process made it; created;
    # completed)
    per_job = sum(instant.values()) - instant[edits] - 2 * gate - 2 * answers - per_process
    assert per_job <= 10, instant
    assert instant["POST checks/create"] == instant["PATCH checks/update"] == 1, instant
