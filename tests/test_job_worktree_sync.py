"""The job worktree the project lead reads is brought to the job branch when the lead reads it,
not after every merge: a round of merges costs one checkout, and the lead never reads a file
a commit behind."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import demo_office
from demo_office import local_source
from local_repo import make_repo

from orchestrator.bus.transactions import create_conversation
from orchestrator.core.messages import ConversationKind, ToolCall
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox
from orchestrator.teams.board import create_task

NOWHERE = Sandbox("unavailable", "not needed: read_file runs no process")
DECIDER = "humans: {decider: alice}\n"  # project "w"


async def open_office(home: Path) -> Office:
    return await demo_office.open_office(home, DECIDER, DemoModel(), sandbox=NOWHERE, name="w")


async def reads(office: Office, path: str) -> str:
    """What the project lead's read_file of `path` in the job worktree answers."""
    call = ToolCall("c", "read_file", {"path": path})
    return (await office.engine.scheduler.runner.tools.run("project-lead", "job:lead", call)).output


async def test_the_lead_reads_every_merge_and_a_restarted_engine_catches_up(
    tmp_path: Path,
) -> None:
    origin = make_repo(tmp_path / "origin")
    office = await open_office(tmp_path / "home")
    try:
        job = await office.start_here(
            project="w",
            key="local:1",
            title="t",
            brief="b",
            source=local_source(origin, "t", repo="local/widgets"),
        )
        store = office.engine.store
        for title in ("one", "two"):
            await store.write(
                partial(create_task, job_id=job.job_id, title=title, spec="s", created_by="l")
            )
        await store.write(
            partial(
                create_conversation,
                conversation_id="job:lead",
                kind=ConversationKind.JOB,
                agent="project-lead",
                initiator="office-manager",
                parent_id=None,
                job_id=job.job_id,
            )
        )

        async def lead_reads(path: str) -> str:
            return await reads(office, path)

        async def merge(number: int) -> None:
            slot = await office.workspace.lease(job.space, number)
            (slot.path / f"task{number}.txt").write_text(f"task {number}\n")
            await office.workspace.commit_task(slot, f"task {number}", author=("w", "w@x"))
            assert (await office.workspace.merge_task(job.space, number, "t")).commit
            await office.workspace.release(job.space, number)

        await merge(1)
        assert "task 1" in await lead_reads("task1.txt")
        await merge(2)
        assert "task 2" in await lead_reads("task2.txt"), "the second merge is read too"
    finally:
        await office.close()

    (job.space.path / "task2.txt").unlink()  # as if the process died before its checkout
    again = await open_office(tmp_path / "home")
    try:
        assert "task 2" in await reads(again, "task2.txt"), "a restarted engine brings it up"
    finally:
        await again.close()
