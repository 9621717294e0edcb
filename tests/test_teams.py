"""A whole job through the hierarchy, on a real repository, with the scripted organisation."""

from __future__ import annotations

from pathlib import Path

import pytest
import teams_script as script

from orchestrator.board import list_tasks, task_log


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
        "mirror": job.space.mirror,
        "branch": job.space.branch,
        "requests": requests,
    }


def test_every_task_is_done_and_merged(finished: dict[str, object]) -> None:
    tasks = finished["tasks"]
    assert [t.state for t in tasks] == ["done"] * 6  # type: ignore[attr-defined]
    log = script.git(finished["mirror"], "log", "--format=%s", finished["branch"])  # type: ignore[arg-type]
    merges = [line for line in log.splitlines() if line.startswith("Merge task")]
    assert len(merges) == 5, log  # the conflicting task came in through its resolution
    assert "Job done" in str(finished["result"])


def test_the_independent_tasks_ran_at_once(finished: dict[str, object]) -> None:
    log = finished["log"]
    order = [(n, event) for n, event, _ in log if event in ("started", "ended")]  # type: ignore[attr-defined]
    first_end = min(i for i, (n, e) in enumerate(order) if e == "ended")
    started_before = {n for n, e in order[:first_end] if e == "started"}
    assert {1, 2, 4} <= started_before
