"""The lead checkpoints on a long job, and a restarted engine cleans up after the last one."""

from __future__ import annotations

import re
from pathlib import Path

import teams_script as script

from orchestrator.agents.context import COMPACT_INSTRUCTION
from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.office import Office
from orchestrator.models.scripted import FunctionModel
from orchestrator.sandbox.probe import probe
from orchestrator.teams.board import list_tasks

TASKS = 8


def sequential_lead(request: ModelRequest) -> AssistantTurn:
    """Plans eight tasks, then dispatches them one at a time."""
    if request.messages[-1].text == COMPACT_INSTRUCTION:
        return AssistantTurn(text="Checkpoint: dispatching the tasks one by one.")
    on_board = {int(n) for m in request.messages for n in re.findall(r"#(\d+) \[done\]", m.text)}
    dispatched = on_board | {
        c.args["task"] for m in request.messages for c in m.tool_calls if c.name == "dispatch"
    }
    planned = on_board or any(
        c.name == "task_create" for m in request.messages for c in m.tool_calls
    )
    if not planned:
        creates = [
            script.call(
                f"c{n}", "task_create", title=f"Add file {n}", spec=f"f{n}.txt", review="none"
            )
            for n in range(1, TASKS + 1)
        ]
        return script.turn(*creates)
    if len(dispatched) < TASKS:
        n = min(set(range(1, TASKS + 1)) - dispatched)
        return script.turn(script.call(f"d{n}", "dispatch", task=n, brief=f"write f{n}.txt"))
    return AssistantTurn(text="All eight merged.")


def writer(request: ModelRequest) -> AssistantTurn:
    number = script.task_number(request.messages[0].text)
    _, after = script.last_request(request.messages)
    if after == 0:
        return script.turn(script.call("w", "write_file", path=f"f{number}.txt", content="x\n"))
    return AssistantTurn(text=f"Wrote f{number}.txt.")


async def test_the_lead_checkpoints_to_its_board(tmp_path: Path) -> None:
    roles = {
        **script.ROLES,
        "project-lead": sequential_lead,
        "implementer": writer,
        "phase-reviewer": lambda r: AssistantTurn(text="approve"),
    }
    model = FunctionModel(lambda r: roles[r.agent.rsplit("/", 1)[-1]](r))
    org = load_organisation(shipped_org_dir())
    project = load_project(script.PROJECT, org=org, source="p.yaml", default_name="widgets")
    small = project.lead.model_copy(update={"context_tokens": 500})
    project = project.model_copy(update={"lead": small})
    home = tmp_path / "home"
    office = await Office.open(
        home,
        org=org,
        projects=[project],
        models=lambda _: model,
        env=script.ENV,
        sandbox=await probe(script.ENV, home=home),
    )
    try:
        job = await script.start(office, script.make_repo(tmp_path / "widgets"))
        await office.run(job, script.never)
        tasks = await office.engine.store.read(lambda tx: list_tasks(tx, job.job_id))
    finally:
        await office.close()
    assert [t.state for t in tasks] == ["done"] * TASKS
    lead = [r for r in model.requests if r.agent.endswith("project-lead")]
    checkpoints = [m for r in lead for m in r.messages if m.content.get("kind") == "compaction"]
    assert checkpoints, "the lead's conversation grew past its bound and was compacted"
    assert "The task board at this checkpoint:" in checkpoints[-1].text
    assert "#1 [done] Add file 1" in checkpoints[-1].text
    peak = max(sum(m.size for m in r.messages) for r in lead[len(lead) // 2 :])
    assert peak < 4 * 500 * 3, "the lead's view stays near its bound"


async def test_a_restart_releases_slots_and_removes_worktrees_of_ended_jobs(tmp_path: Path) -> None:
    model = script.model()
    office = await script.open_office(tmp_path / "home", model)
    job = await script.start(office, script.make_repo(tmp_path / "widgets"))
    await office.run(job, script.never)
    store = office.engine.store
    await store.write(lambda tx: tx.execute("UPDATE jobs SET state = 'complete'"))
    await store.write(  # as if the engine died holding a lease of a task that has ended
        lambda tx: tx.execute(
            "UPDATE worktree_slots SET task_id = (SELECT task_id FROM tasks WHERE number = 1)"
            " WHERE path = (SELECT min(path) FROM worktree_slots)"
        )
    )
    await office.close()
    assert job.space.path.exists()
    reopened = await script.open_office(tmp_path / "home", model)
    try:
        leased = await reopened.engine.store.read(
            lambda tx: tx.execute(
                "SELECT count(*) FROM worktree_slots WHERE task_id IS NOT NULL"
            ).fetchone()
        )
    finally:
        await reopened.close()
    assert leased == (0,)
    assert not job.space.path.exists()
    worktrees = script.git(job.space.repo, "worktree", "list")
    assert len(worktrees.splitlines()) == 1, worktrees  # the job's repository alone
