"""A job reads its project's standing learnings from its own clone, at the commit it starts from.

`.teaparty/learnings.md` on the repository's default branch is read when the job's workspace
is made (no forge API call), kept with the job, and in its agents' standing context from
the first turn. A repository without the file gives no learnings and no error; learnings
the job was started with win; a later start of the same job keeps what it read.
"""

from __future__ import annotations

from pathlib import Path

import demo_office
import pytest
from demo_office import local_source
from fakes import FunctionModel, calls, say, send
from local_repo import committed

from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.learnings import LEARNINGS_FILE, MAX_LEARNINGS_BYTES, capped
from orchestrator.jobs.office import Office
from orchestrator.sandbox.confine import Sandbox

PROJECT = "humans: {decider: carol}\n"
LEARNINGS = "WIDGETS-LEARNING: run `make check` before you reply.\n"
LEAD = "widgets/project-lead"
KEY = "local:widgets#1"
NOWHERE = Sandbox("unavailable", "not needed: the model here runs no shell")


def repository(path: Path, files: dict[str, str]) -> Path:
    """A repository whose `main` holds `files` and a README."""
    path.mkdir()
    return committed(path, {"README.md": "widgets\n", **files})


def lead_says_done() -> FunctionModel:
    """The office manager hands the job to the lead, who replies at once."""

    def reply(request: ModelRequest) -> AssistantTurn:
        if request.agent == LEAD:
            return say("Done.")
        if len(model.requests_of(request.agent)) == 1:
            return calls(send("c1", "project-lead", "Do it."))
        return say("The lead did it.")

    model = FunctionModel(reply)
    return model


async def open_office(home: Path, model: FunctionModel) -> Office:
    return await demo_office.open_office(home, PROJECT, model)


async def start(office: Office, repo: Path, *, learnings: str | None = None) -> int:
    started = await office.start_job(
        project="widgets",
        key=KEY,
        title="Add a changelog",
        brief="Job: Add a changelog.",
        source=local_source(repo, "changelog"),
        project_text=PROJECT,
        learnings=learnings,
    )
    return started.job_id


async def stored(office: Office, job_id: int) -> str | None:
    row = await office.engine.store.read(
        lambda tx: tx.execute("SELECT learnings FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
    )
    assert row is not None
    return None if row[0] is None else str(row[0])


async def test_the_default_branchs_learnings_reach_the_first_turn(tmp_path: Path) -> None:
    repo = repository(tmp_path / "widgets", {LEARNINGS_FILE: LEARNINGS})
    model = lead_says_done()
    office = await open_office(tmp_path / "home", model)
    try:
        job_id = await start(office, repo)
        assert await stored(office, job_id) is None, "nothing read before the workspace"
        space = await office.prepare(job_id)
        (space.path / LEARNINGS_FILE).write_text("AGENT-WRITTEN\n")  # the worktree: never read
        assert await stored(office, job_id) == LEARNINGS
        await office.run_until_idle()
        (first,) = [r for r in model.requests_of(LEAD) if r.tools]  # not the triage
        assert "## Standing learnings of this project\n" + LEARNINGS in first.system

        await start(office, repo)  # the issue labelled again: the job keeps what it read
        assert await stored(office, job_id) == LEARNINGS
        assert LEARNINGS in office.agents.spec(LEAD).system
    finally:
        await office.close()


async def test_a_repository_without_learnings_gives_none_and_no_error(tmp_path: Path) -> None:
    repo = repository(tmp_path / "widgets", {".teaparty/learnings.md/README": "a folder\n"})
    model = lead_says_done()
    office = await open_office(tmp_path / "home", model)
    try:
        job_id = await start(office, repo)
        await office.prepare(job_id)
        assert await stored(office, job_id) is None
        await office.run_until_idle()
        (first,) = [r for r in model.requests_of(LEAD) if r.tools]  # not the triage
        assert "Standing learnings" not in first.system
    finally:
        await office.close()


async def test_learnings_the_job_started_with_are_kept(tmp_path: Path) -> None:
    repo = repository(tmp_path / "widgets", {LEARNINGS_FILE: LEARNINGS})
    office = await open_office(tmp_path / "home", lead_says_done())
    try:
        job_id = await start(office, repo, learnings="Given at the start.\n")
        await office.prepare(job_id)
        assert await stored(office, job_id) == "Given at the start.\n"
    finally:
        await office.close()


async def test_long_learnings_are_cut_with_a_note(tmp_path: Path) -> None:
    line = "Keep functions short.\n"
    long = line * (2 * MAX_LEARNINGS_BYTES // len(line))
    repo = repository(tmp_path / "widgets", {LEARNINGS_FILE: long})
    office = await open_office(tmp_path / "home", lead_says_done())
    try:
        job_id = await start(office, repo)
        await office.prepare(job_id)
        kept = await stored(office, job_id)
        assert kept is not None
        assert kept.startswith(line)
        assert kept.endswith(f"[{LEARNINGS_FILE} was cut here: it is longer than 64 KiB]\n")
        assert len(kept.encode()) < MAX_LEARNINGS_BYTES + 100
    finally:
        await office.close()


async def test_a_job_restored_without_learnings_reads_them_from_its_base(tmp_path: Path) -> None:
    """A job an older version started (its learnings never read) gets them on restore."""
    repo = repository(tmp_path / "widgets", {LEARNINGS_FILE: LEARNINGS})
    office = await open_office(tmp_path / "home", lead_says_done())
    try:
        job_id = await start(office, repo)
        await office.prepare(job_id)
        await office.engine.store.write(
            lambda tx: tx.execute("UPDATE jobs SET learnings = NULL WHERE job_id = ?", (job_id,))
        )
        await office.restore_project(job_id, PROJECT)
        assert await stored(office, job_id) == LEARNINGS
        await office.restore_project(job_id, PROJECT, learnings="Replaced.\n")
        assert await stored(office, job_id) == "Replaced.\n"
        assert "Replaced." in office.agents.spec(LEAD).system
    finally:
        await office.close()


@pytest.mark.parametrize(
    ("text", "limit", "want"),
    [
        ("short", 10, "short"),
        ("ééé", 5, f"éé\n\n[{LEARNINGS_FILE} was cut here: it is longer than 0 KiB]\n"),
    ],
)
def test_the_cap_cuts_at_a_character(text: str, limit: int, want: str) -> None:
    assert capped(text, limit=limit) == want
