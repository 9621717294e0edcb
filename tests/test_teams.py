"""A whole job through the hierarchy, on a real repository, with the scripted organisation."""

from __future__ import annotations

from pathlib import Path

import pytest
import teams_script as script

from orchestrator.teams.board import list_tasks, task_log


@pytest.fixture
async def finished(tmp_path: Path) -> dict[str, object]:
    repo = script.make_repo(tmp_path / "widgets")
    model = script.model()
    office = await script.open_office(tmp_path / "home", model)
    try:
        job = await script.start(office, repo)
        result = await office.run(job, script.never)
        store = office.engine.store
        log = await store.read(lambda tx: task_log(tx, job.job_id))
        tasks = await store.read(lambda tx: list_tasks(tx, job.job_id))
        requests = {a: model.requests_of(a) for a in {r.agent for r in model.requests}}
    finally:
        await office.close()
    return {
        "result": result,
        "log": log,
        "tasks": tasks,
        "mirror": job.space.repo,
        "branch": job.space.branch,
        "requests": requests,
    }


def test_every_task_is_done_and_merged(finished: dict[str, object]) -> None:
    tasks = finished["tasks"]
    assert [t.state for t in tasks] == ["done"] * 6  # type: ignore[attr-defined]
    log = script.git(finished["mirror"], "log", "--format=%s", finished["branch"])  # type: ignore[arg-type]
    merges = [line for line in log.splitlines() if line.startswith("Merge task")]
    assert len(merges) == 5, log  # the conflicting task came in through its resolution
    assert "All tasks merged" in str(finished["result"]), "the lead's reply is the job's"


def test_the_independent_tasks_ran_at_once(finished: dict[str, object]) -> None:
    log = finished["log"]
    order = [(n, event) for n, event, _ in log if event in ("started", "ended")]  # type: ignore[attr-defined]
    first_end = min(i for i, (n, e) in enumerate(order) if e == "ended")
    started_before = {n for n, e in order[:first_end] if e == "started"}
    assert {1, 2, 4} <= started_before


def _texts(finished: dict[str, object], role: str) -> str:
    requests = finished["requests"]
    assert isinstance(requests, dict)
    return "\n".join(
        m.text
        for agent, reqs in requests.items()
        if agent.endswith(role)
        for req in reqs
        for m in req.messages
    )


def test_a_review_round_asked_for_a_change_that_the_worker_made(
    finished: dict[str, object],
) -> None:
    log = finished["log"]
    assert [e for n, e, _ in log if n == 1].count("review") == 2  # type: ignore[attr-defined]
    tree = script.git(finished["mirror"], "ls-tree", "-r", "--name-only", finished["branch"])  # type: ignore[arg-type]
    assert "fix-1.txt" in tree.split()
    reviewers = _texts(finished, "spec-reviewer")
    assert "alpha.py" in reviewers  # the reviewer read the diff in the task's worktree


def test_the_conflict_reached_the_lead_with_its_hunks_and_was_resolved(
    finished: dict[str, object],
) -> None:
    lead = _texts(finished, "coding-lead")
    assert "conflicts with the job branch" in lead
    for expected in ("README.md", "<<<<<<<", ">>>>>>>"):
        assert expected in lead
    tasks = finished["tasks"]
    assert tasks[4].resolves in (1, 2)  # type: ignore[index]
    resolved = tasks[tasks[4].resolves - 1]  # type: ignore[index]
    assert resolved.result == "merged through task #5"
    readme = script.git(finished["mirror"], "show", f"{finished['branch']}:README.md")
    assert readme == "widgets: alpha and beta\n"


def test_the_phase_reviewer_turned_its_changes_into_a_task(finished: dict[str, object]) -> None:
    tasks = finished["tasks"]
    assert tasks[5].created_by.endswith("phase-reviewer")  # type: ignore[index]
    assert "CHANGELOG" in tasks[5].title  # type: ignore[index]
    phases = [d for _, e, d in finished["log"] if e == "phase review"]  # type: ignore[attr-defined]
    assert phases == ["6", ""]


def test_worker_and_reviewer_contexts_hold_one_task(finished: dict[str, object]) -> None:
    requests = finished["requests"]
    assert isinstance(requests, dict)
    for agent in ("implementer", "spec-reviewer", "quality-reviewer"):
        for request in requests[f"widgets/coding/{agent}"]:
            seen = {
                m.text.split("#", 1)[1].split(" ")[0].rstrip(":")
                for m in request.messages
                if "ask #" in m.text[:20]
            }
            assert len(seen) == 1, seen  # its own task's brief, never another task's
