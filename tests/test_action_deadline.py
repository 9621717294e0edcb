"""`teaparty action` at its time limit: past its deadline a run starts no model or tool call,
and it starts a continuation only when a run could go on now, not when its jobs wait on a
person. Each run is its own process; the model is a local stand-in for the Messages API
playing the scripted organisation, slow where a test says so."""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from action_harness import NO_PLAN, Run, act, labelled, last, runner_hub
from app_harness import OWNER, REPO, bodies
from fake_anthropic import fake_anthropic, role

from bot.runner.env import MARGIN_S
from orchestrator.core.model import ModelRequest

pytestmark = pytest.mark.timeout(180)
WRAP_UP_S = 10.0  # after its deadline a run syncs, preserves and saves its state, and exits
# How long a run may work: more than it takes to start and reach its first model call on a
# loaded machine (two test processes beside two CPU hogs took more than 12 s). The call the
# deadline passes at takes longer than this, counted from its own start, so the deadline
# (counted from the run's start, before it) always falls inside it.
WINDOW_S = 60.0
# The scripted job without a plan question, call by call, as one run makes it: the office
# manager's hand-over and reply are the engine's (jobs/flat_manager.py), and the one task's
# reviewers read the whole change (no phase review).
JOB_CALLS = [
    "triage",
    "lead",
    "lead",
    "worker",
    "worker",
    "reviewer",
    "reviewer",
    "lead",
]


def minutes_left(seconds: float) -> str:
    """TEAPARTY_TIMEOUT_MINUTES for a run whose deadline comes `seconds` after it starts."""
    return str((MARGIN_S + seconds) / 60)


def deadline_of(run: Run) -> float:
    """When the run stops starting work, as its log says."""
    found = re.search(r"the run works until (\S+):", run.output)
    assert found is not None, run.output
    return datetime.fromisoformat(found[1]).timestamp()


CARRY_ON = json.dumps({"ref": "refs/heads/main", "inputs": {}}).encode()


async def test_past_its_deadline_a_run_starts_no_model_call_and_its_continuation_goes_on(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    with fake_anthropic() as model:
        async with hub.serve() as api_url:
            files = {".teaparty/project.yaml": NO_PLAN}
            await hub.push_to_branch(OWNER, REPO, "main", "alice", files)
            number = await labelled(hub, "Add a changelog", "Please.")
            made: list[ModelRequest] = []

            def first_outlasts_the_run(request: ModelRequest) -> float:
                made.append(request)
                return WINDOW_S + 1 if len(made) == 1 else 0.0

            model.delay = first_outlasts_the_run
            event = last(hub, "issues")
            left = {"TEAPARTY_TIMEOUT_MINUTES": minutes_left(WINDOW_S)}
            first = await act(hub, api_url, tmp_path, "issues", event, **left, **model.env())
            ended = time.time()
            assert first.code == 0, first.output
            deadline = deadline_of(first)
            calls = list(model.calls)
            assert any(c.started < deadline for c in calls), "no model call before the deadline"
            assert [c.role for c in calls if c.started >= deadline] == []
            assert sum(c.ended > deadline for c in calls) <= 1  # the call under way, finished
            assert ended - max(c.ended for c in calls) < WRAP_UP_S
            assert "the run's deadline has passed; the next run goes on" in first.output
            assert hub.pulls(OWNER, REPO) == []
            assert len(hub.state.workflow_dispatches) == 1, first.output
            assert "its continuation (teaparty.yml@refs/heads/main) goes on" in first.summary

            model.delay = lambda request: 0.0
            second = await act(hub, api_url, tmp_path, "workflow_dispatch", CARRY_ON, **model.env())
            assert second.code == 0, second.output
            assert len(hub.pulls(OWNER, REPO)) == 1, second.output
            assert "✅" in bodies(hub, number, "job:")[0]
            # The job's calls, each made once over the two runs: the continuation took each
            # conversation up where it stood.
            assert [c.role for c in model.calls] == JOB_CALLS
            assert len({c.key for c in model.calls}) == len(JOB_CALLS)
            assert len(hub.state.workflow_dispatches) == 1  # finished: no second continuation
    assert hub.violations == [], hub.violations


async def test_a_run_whose_deadline_passes_at_a_question_starts_no_continuation(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    with fake_anthropic() as model:
        async with hub.serve() as api_url:
            number = await labelled(hub, "Add a changelog", "Please.")
            # The proxy's look at the plan question outlasts the run.
            model.delay = lambda request: WINDOW_S + 1 if role(request) == "proxy" else 0.0
            event = last(hub, "issues")
            left = {"TEAPARTY_TIMEOUT_MINUTES": minutes_left(WINDOW_S)}
            first = await act(hub, api_url, tmp_path, "issues", event, **left, **model.env())
            assert first.code == 0, first.output
            deadline = deadline_of(first)
            (proxy,) = [c for c in model.calls if c.role == "proxy"]
            assert proxy.started < deadline < proxy.ended, "the deadline passed at the question"
            assert len(bodies(hub, number, "gate:")) == 1, first.output  # the plan, asked
            assert hub.state.workflow_dispatches == []
            assert "waits on a person" in first.summary
            assert "no continuation was started" in first.summary

            model.delay = lambda request: 0.0
            await hub.comment_as(OWNER, REPO, number, "alice", "yes")
            answer = last(hub, "issue_comment")
            second = await act(hub, api_url, tmp_path, "issue_comment", answer, **model.env())
            assert second.code == 0, second.output
            assert len(hub.pulls(OWNER, REPO)) == 1, second.output
            assert hub.state.workflow_dispatches == []
    assert hub.violations == [], hub.violations


async def test_a_job_at_its_budget_question_ends_the_run_at_once_with_no_continuation(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    with fake_anthropic() as model:
        model.tokens = 1_000  # a call: the third passes the cap, the fourth is not made
        async with hub.serve() as api_url:
            capped = {".teaparty/project.yaml": NO_PLAN + "budget: {max_tokens: 2500}\n"}
            await hub.push_to_branch(OWNER, REPO, "main", "alice", capped)
            number = await labelled(hub, "Add a changelog", "Please.")
            event = last(hub, "issues")
            left = {"TEAPARTY_TIMEOUT_MINUTES": minutes_left(30)}
            first = await act(hub, api_url, tmp_path, "issues", event, **left, **model.env())
            ended = time.time()
            assert first.code == 0, first.output
            (question,) = bodies(hub, number, "gate:")
            assert "the job has reached its budget" in question
            assert ended < deadline_of(first), "the run waited for its deadline at the question"
            assert len(model.calls) == 3
            assert hub.state.workflow_dispatches == []
    assert hub.violations == [], hub.violations
