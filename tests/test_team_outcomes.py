"""How a mini-team ends when it does not merge: escalation, blocked tasks, refused dispatches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import teams_script as script

from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.models.scripted import FunctionModel
from orchestrator.teams.board import list_tasks, task_log

Role = Callable[[ModelRequest], AssistantTurn]


def lead_of_two(request: ModelRequest) -> AssistantTurn:
    """Plans #1 and #2 (waiting for #1), dispatches #1, then tries #2, then reports."""
    done = script.results(request.messages)
    if not done:
        return script.turn(
            script.call("c1", "task_create", title="Add alpha", spec="alpha.py holds ALPHA."),
            script.call("c2", "task_create", title="Use alpha", spec="uses it", blocked_by=[1]),
        )
    if len(done) == 2:
        return script.turn(script.call("d1", "dispatch", task=1, brief="go"))
    if len(done) == 3:
        return script.turn(script.call("d2", "dispatch", task=2, brief="go"))
    return AssistantTurn(text="Stopped: " + " | ".join(done[2:]))


def picky(request: ModelRequest) -> AssistantTurn:
    text, after = script.last_request(request.messages)
    return AssistantTurn(text=f"request changes\n1. Still wrong (review {text[:40]!r}).")


def gives_up(request: ModelRequest) -> AssistantTurn:
    return AssistantTurn(text="blocked: the spec names a module that does not exist")


async def run(tmp_path: Path, project: str = script.PROJECT, **roles: Role) -> dict[str, object]:
    table = {**script.ROLES, "project-lead": lead_of_two, **roles}
    model = FunctionModel(lambda r: table[r.agent.rsplit("/", 1)[-1]](r))
    repo = script.make_repo(tmp_path / "widgets")
    office = await script.open_office(tmp_path / "home", model, project)
    try:
        job = await script.start(office, repo)
        await office.run(job, script.never)
        store = office.engine.store
        tasks = await store.read(lambda tx: list_tasks(tx, job.job_id))
        log = await store.read(lambda tx: task_log(tx, job.job_id))
        lead = [r for r in model.requests if r.agent.endswith("project-lead")][-1]
    finally:
        await office.close()
    return {"tasks": tasks, "log": log, "lead": lead, "model": model}


async def test_three_failed_review_rounds_escalate_to_the_lead(tmp_path: Path) -> None:
    out = await run(tmp_path, **{"spec-reviewer": picky})
    tasks = out["tasks"]
    assert tasks[0].state == "blocked"  # type: ignore[index]
    assert tasks[0].blocked_reason.startswith("escalated")  # type: ignore[index]
    reviews = [e for n, e, _ in out["log"] if n == 1 and e == "review"]  # type: ignore[attr-defined]
    assert len(reviews) == 3
    model: FunctionModel = out["model"]  # type: ignore[assignment]
    worker_briefs = [r for r in model.requests if r.agent.endswith("implementer")]
    feedback = {m.text for r in worker_briefs for m in r.messages if m.text.startswith("Review")}
    assert len(feedback) == 2  # rounds 1 and 2 went back to the worker; round 3 escalated
    lead_view = "\n".join(m.text for m in out["lead"].messages)  # type: ignore[attr-defined]
    assert "Task #1 escalated: no approval after 3 review round(s)" in lead_view
    assert "Still wrong" in lead_view


async def test_a_blocked_tasks_dependents_never_start(tmp_path: Path) -> None:
    out = await run(tmp_path, implementer=gives_up)
    tasks = out["tasks"]
    assert [t.state for t in tasks] == ["blocked", "pending"]  # type: ignore[attr-defined]
    assert "does not exist" in (tasks[0].blocked_reason or "")  # type: ignore[index]
    assert all(n != 2 for n, _, _ in out["log"])  # type: ignore[attr-defined]
    lead_view = "\n".join(m.text for m in out["lead"].messages)  # type: ignore[attr-defined]
    assert "task #2 waits for #1 (blocked)" in lead_view
    model: FunctionModel = out["model"]  # type: ignore[assignment]
    assert not [r for r in model.requests if "reviewer" in r.agent]


def lead_of_four(request: ModelRequest) -> AssistantTurn:
    """Plans four independent tasks (task 1 planned without review) and dispatches all."""
    done = script.results(request.messages)
    if not done:
        return script.turn(
            *(
                script.call(f"c{n}", "task_create", title=f"File {n}", spec=f"f{n}", review="none")
                for n in range(1, 5)
            )
        )
    if len(done) == 4:
        return script.turn(
            *(script.call(f"d{n}", "dispatch", task=n, brief="go") for n in range(1, 5))
        )
    return AssistantTurn(text="done")


def worker_of_four(request: ModelRequest) -> AssistantTurn:
    number = script.task_number(request.messages[0].text)
    text, after = script.last_request(request.messages)
    if after == 0:
        return script.turn(script.call("w", "write_file", path=f"f{number}.txt", content=text[:9]))
    if number == 1 and not text.startswith("Review"):
        return AssistantTurn(text="request review: this touched more than planned")
    return AssistantTurn(text=f"Wrote f{number}.txt")


async def test_a_job_runs_no_more_mini_teams_at_once_than_its_bound(tmp_path: Path) -> None:
    approve = {"phase-reviewer": lambda r: AssistantTurn(text="approve")}
    out = await run(
        tmp_path,
        project="humans: {decider: alice}\nparallel: 2\ngates: {plan: never}\n",
        **{"project-lead": lead_of_four, "implementer": worker_of_four, **approve},
    )
    assert [t.state for t in out["tasks"]] == ["done"] * 4  # type: ignore[attr-defined]
    running, peak = set(), 0
    for number, event, _ in out["log"]:  # type: ignore[attr-defined]
        if event == "started":
            running.add(number)
        elif event == "ended":
            running.discard(number)
        peak = max(peak, len(running))
    assert peak == 2


async def test_a_worker_may_ask_for_review_of_a_task_planned_without(tmp_path: Path) -> None:
    out = await run(tmp_path, **{"project-lead": lead_of_four, "implementer": worker_of_four})
    model: FunctionModel = out["model"]  # type: ignore[assignment]
    reviewed = {
        script.task_number(r.messages[0].text)
        for r in model.requests
        if r.agent.endswith(("spec-reviewer", "quality-reviewer"))
    }
    assert reviewed == {1}  # only the task whose worker asked
    # the scripted spec reviewer asks task #1 for one change, so two rounds
    assert [e for n, e, _ in out["log"] if n == 1].count("review") == 2  # type: ignore[attr-defined]


def forgetful_worker(request: ModelRequest) -> AssistantTurn:
    """Says it is done before changing anything; writes the file once told it is empty."""
    text, after = script.last_request(request.messages)
    if "has no commits" not in text:
        return AssistantTurn(text="Done: alpha.py written.")
    if after == 0:
        return script.turn(script.call("w", "write_file", path="alpha.py", content="ALPHA = 1\n"))
    return AssistantTurn(text="Wrote alpha.py.")


def never_commits(request: ModelRequest) -> AssistantTurn:
    return AssistantTurn(text="Done, trust me.")


async def test_a_worker_that_committed_nothing_is_sent_back_not_merged(tmp_path: Path) -> None:
    out = await run(tmp_path, implementer=forgetful_worker)
    tasks = out["tasks"]
    assert tasks[0].state == "done"  # type: ignore[index]
    reviews = [d for n, e, d in out["log"] if n == 1 and e == "review"]  # type: ignore[attr-defined]
    assert len(reviews) == 2  # the empty branch, then the commit
    model: FunctionModel = out["model"]  # type: ignore[assignment]
    reviewed = [r for r in model.requests if r.agent.endswith("reviewer")]
    assert reviewed  # reviewers saw only the branch with the commit
    assert all("0 commit(s)" not in r.messages[0].text for r in reviewed)


async def test_a_worker_that_never_commits_is_escalated(tmp_path: Path) -> None:
    out = await run(tmp_path, implementer=never_commits)
    tasks = out["tasks"]
    assert tasks[0].state == "blocked"  # type: ignore[index]
    assert "committed nothing" in (tasks[0].blocked_reason or "")  # type: ignore[index]
    model: FunctionModel = out["model"]  # type: ignore[assignment]
    assert not [r for r in model.requests if "reviewer" in r.agent]
