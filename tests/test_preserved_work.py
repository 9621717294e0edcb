"""A job's unpublished work carried to a fresh machine on its remote, as a runner's next run
needs it: real git (a bare remote as the job's source), real SQLite, the demo organisation.

On home A the job works until it waits (a task merged into its branch, nothing published);
its branches are preserved on refs outside refs/heads; the store is snapshotted into home B
and home A is deleted. On home B the job's workspace is rebuilt from the remote at the same
commits, and driving it to the end delivers the same work. Without anything preserved the
branch starts again where the job started, and says so. Preserving never forces; forgetting
deletes only what it listed; the credential reaches no file.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import demo_office
import fakes
import pytest
from demo_office import start_job
from fakes import one_forge
from local_repo import ENV, git, make_repo, plumbed

from orchestrator.api import (
    GitError,
    Office,
    OrchestratorError,
    PreservedRaceError,
    forget_ended_work,
    withdraw,
)
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge, JobState
from orchestrator.jobs.preserved import PreservedWork
from orchestrator.jobs.round_records import Feedback, Point
from orchestrator.store.snapshot import restore_store, snapshot_store
from orchestrator.store.sqlite import Store
from orchestrator.teams import board
from orchestrator.teams.board import create_task
from orchestrator.workspace import preserve as work_refs
from orchestrator.workspace.layout import Workspace
from orchestrator.workspace.marks import job_mark, marked
from orchestrator.workspace.preserve import WORK_REFS, Preserved
from orchestrator.workspace.spaces import JobSpace, task_branch

TITLE = "Add CI"
CI = ".github/workflows/ci.yml"  # a protected path: the job waits after its task merged
SECRET = "c2VjcmV0LXRva2VuLTEyMzQ1"
AUTH = f"Authorization: Basic {SECRET}"
TEXT = "humans: {decider: carol}\n"


@dataclass
class PushingForge(fakes.PushingForge):
    """Pushes the job branch to `remote` as GitHub's does (with AUTH), approves plans and
    leaves protected-path gates open for the test to answer."""

    held: tuple[str, ...] = ("protected-path",)
    auth: str | None = AUTH


def bare_remote(tmp_path: Path) -> Path:
    """The job's source and remote: a bare repository with main's one commit."""
    work = make_repo(tmp_path / "widgets")
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(remote)], check=True, env=ENV)
    return remote


async def open_office(home: Path, path: str = CI) -> Office:
    model = DemoModel(title=TITLE, body="Run the tests on push.", path=path)
    return await demo_office.open_office(home, TEXT, model)


async def start(office: Office, remote: Path) -> int:
    body, hand_off = "Run the tests on push.", "Hand it to the lead."
    return await start_job(
        office, remote, TEXT, title=TITLE, body=body, slug="ci", hand_off=hand_off
    )


async def first_machine(tmp_path: Path, path: str = CI) -> tuple[Path, Path, Office, int]:
    """The bare remote, the first machine's home, its office, and job 1 started there."""
    remote, home = bare_remote(tmp_path), tmp_path / "home-a"
    office = await open_office(home, path)
    return remote, home, office, await start(office, remote)


@asynccontextmanager
async def prepared(tmp_path: Path) -> AsyncIterator[tuple[Office, Path, int, JobSpace]]:
    """An office under `tmp_path` with job 1 started on a bare remote and its workspace
    made: the office, the remote, the job's id and its workspace; the office closed after."""
    remote = bare_remote(tmp_path)
    office = await open_office(tmp_path / "home")
    try:
        job_id = await start(office, remote)
        yield office, remote, job_id, await office.prepare(job_id)
    finally:
        await office.close()


async def drive(office: Office, forge: Forge, job_id: int) -> JobState:
    """Sync and run until the job is done or failed, or waits on an open gate."""

    driver = JobDriver(office, one_forge(forge))
    while (state := await driver.sync(job_id)) not in ("done", "failed"):
        if await office.open_gates(job_id):
            return state
        await office.run_until_idle(job_id)
    return state


def remote_refs(remote: Path, pattern: str) -> dict[str, str]:
    out = git(remote, "for-each-ref", "--format=%(refname) %(objectname)", pattern)
    return dict(line.split(" ") for line in out.splitlines())


async def move(office: Office, tmp_path: Path, home_a: Path) -> Path:
    """The next run's machine: the store snapshotted into home B, home A gone."""
    snapshot = tmp_path / "state.db"
    await snapshot_store(home_a / "teaparty.db", snapshot)
    await office.close()
    shutil.rmtree(home_a)
    home_b = tmp_path / "home-b"
    home_b.mkdir()
    await restore_store(snapshot, home_b / "teaparty.db")
    return home_b


@asynccontextmanager
async def on_machine(home: Path, job_id: int) -> AsyncIterator[tuple[Store, Workspace, JobSpace]]:
    """The next machine's store and workspace under `home`, with no Office (so no recovery
    of orphan slots), and job `job_id`'s workspace as recorded."""
    store = await Store.open(home / "teaparty.db")
    try:
        workspace = Workspace(home, store, tasks=board)
        recorded = await workspace.job(job_id)
        assert recorded is not None
        yield store, workspace, recorded
    finally:
        await store.close()


def files_holding(root: Path, needle: str) -> list[Path]:
    return [
        path
        for path in root.rglob("*")
        if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes()
    ]


async def test_merged_work_comes_back_on_a_fresh_machine_and_is_delivered_as_it_was(
    tmp_path: Path,
) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path)
    forge = PushingForge(office, answers={"The plan:": "yes"}, remote=remote)
    assert await drive(office, forge, job_id) == "waiting"
    (gate,) = await office.open_gates(job_id)
    assert gate.kind == "protected-path"
    space = await office.workspace.job(job_id)
    assert space is not None
    head = await office.branch_head(job_id)
    assert head is not None
    assert head != space.base, "a task merged into the job branch"
    task_head = git(space.repo, "rev-parse", f"refs/heads/{task_branch(space, 1)}").strip()
    assert remote_refs(remote, "refs/heads/teaparty") == {}, "nothing published yet"

    kept = await office.preserve_all(str(remote), auth=AUTH)
    assert kept == (Preserved(job_id, head, ((1, task_head),)),)
    assert remote_refs(remote, WORK_REFS) == {
        f"{WORK_REFS}/{job_id}/job": head,
        f"{WORK_REFS}/{job_id}/task-1": task_head,
    }
    assert await office.preserve(job_id, str(remote), auth=AUTH) == kept[0], "again: no-op"
    assert files_holding(home_a, SECRET) == []

    home_b = await move(office, tmp_path, home_a)
    office = await open_office(home_b)
    try:
        resumed = await office.resume()
        assert resumed.jobs == (job_id,), "a missing workspace does not stop the resume"
        assert not home_a.exists(), "nothing is made where the old machine kept it"
        forge = PushingForge(office, answers={"The plan:": "yes"}, remote=remote)
        assert await drive(office, forge, job_id) == "waiting"
        rebuilt = await office.workspace.job(job_id)
        assert rebuilt is not None
        assert rebuilt.repo.is_relative_to(home_b)
        assert rebuilt.path.is_relative_to(home_b)
        assert (rebuilt.path / CI).is_file(), "the job worktree is back, with the task's file"
        assert await office.branch_head(job_id) == head
        assert git(rebuilt.repo, "rev-parse", f"refs/heads/{task_branch(rebuilt, 1)}").strip() == (
            task_head
        )
        assert git(rebuilt.repo, "for-each-ref", WORK_REFS) == "", "only branches are kept"
        assert [g.gate_id for g in await office.open_gates(job_id)] == [gate.gate_id]

        await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await drive(office, forge, job_id) == "done"
        assert forge.delivered == [rebuilt.branch]
        assert remote_refs(remote, f"refs/heads/{rebuilt.branch}") == {
            f"refs/heads/{rebuilt.branch}": head
        }, "the same work, pushed as it was approved"

        assert files_holding(home_b, SECRET) == [], "the credential is in no file, store included"
        assert files_holding(remote, SECRET) == []
        assert sorted(await office.forget_ended(str(remote), auth=AUTH)) == [
            f"{WORK_REFS}/{job_id}/job",
            f"{WORK_REFS}/{job_id}/task-1",
        ]
        assert remote_refs(remote, WORK_REFS) == {}
        assert await office.forget_ended(str(remote), auth=AUTH) == ()
    finally:
        await office.close()


async def test_with_nothing_preserved_the_branch_starts_again_where_the_job_started(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path)
    forge = PushingForge(office, answers={"The plan:": "yes"}, remote=remote)
    assert await drive(office, forge, job_id) == "waiting"
    space = await office.workspace.job(job_id)
    assert space is not None
    assert await office.branch_head(job_id) != space.base

    home_b = await move(office, tmp_path, home_a)
    office = await open_office(home_b)
    try:
        await office.resume()
        caplog.set_level(logging.INFO, logger="orchestrator")
        await drive(office, PushingForge(office, remote=remote), job_id)
        assert await office.branch_head(job_id) == space.base, "the merged work is lost"
        said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert f"job {job_id}: nothing of its work was preserved on {remote}" in "\n".join(said)
        rebuilt = await office.workspace.job(job_id)
        assert rebuilt is not None
        assert (rebuilt.path / "README.md").is_file()
        assert not (rebuilt.path / CI).exists()
    finally:
        await office.close()


async def test_a_job_held_at_its_plan_is_preserved_at_its_start_and_finishes_elsewhere(
    tmp_path: Path,
) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path, path="docs/ci.md")
    held = PushingForge(office, remote=remote, held=("protected-path", "plan"))
    assert await drive(office, held, job_id) == "waiting"
    (plan,) = await office.open_gates(job_id)
    assert plan.kind == "plan"
    space = await office.workspace.job(job_id)
    assert space is not None
    (kept,) = await office.preserve_all(str(remote), auth=AUTH)
    assert kept == Preserved(job_id, space.base), "no task yet: the branch at its start"

    home_b = await move(office, tmp_path, home_a)
    office = await open_office(home_b, path="docs/ci.md")
    try:
        await office.resume()
        forge = PushingForge(office, remote=remote)
        await office.answer_gate(plan.gate_id, text="yes", answered_by="carol")
        assert await drive(office, forge, job_id) == "done"
        head = await office.branch_head(job_id)
        assert head is not None
        assert head != space.base
        assert forge.delivered == [space.branch]
        assert remote_refs(remote, f"refs/heads/{space.branch}") == {
            f"refs/heads/{space.branch}": head
        }
        assert git(remote, "show", f"{head}:docs/ci.md").startswith("# Add CI")
    finally:
        await office.close()


async def test_a_delivered_job_back_for_a_review_round_starts_from_its_published_branch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path, path="docs/ci.md")
    forge = PushingForge(office, answers={"The plan:": "yes"}, remote=remote)
    assert await drive(office, forge, job_id) == "done"
    published = await office.branch_head(job_id)
    await office.rounds.pull_opened(job_id, 2, "https://github.test/o/r/pull/2")
    assert await office.preserve_all(str(remote), auth=AUTH) == (), "an ended job: nothing"

    home_b = await move(office, tmp_path, home_a)
    office = await open_office(home_b, path="docs/ci.md")
    try:
        await office.resume()
        point = Point("thread:T1:1", "alice", "Say why.", thread_id="T1", comment_id=1)
        await office.rounds.feedback(job_id, Feedback(("alice",), (point,)))
        caplog.set_level(logging.INFO, logger="orchestrator")
        forge = PushingForge(office, answers={"The plan:": "yes"}, remote=remote)
        assert await drive(office, forge, job_id) == "done"
        assert f"job {job_id}: nothing preserved; its branch is back at {published[:12]}" in (
            caplog.text
        )
        (review,) = forge.rounds_delivered
        assert review.number == 1
        head = await office.branch_head(job_id)
        space = await office.workspace.job(job_id)
        assert space is not None
        assert head is not None
        assert head != published
        assert git(space.repo, "merge-base", "--is-ancestor", published, head) == "", (
            "the round's work is on top of what was published"
        )
    finally:
        await office.close()


async def test_a_task_in_progress_gets_a_fresh_slot_on_its_preserved_branch(
    tmp_path: Path,
) -> None:
    """Its commits come back, and the files its worker had not had committed come back
    uncommitted: changed, added and deleted as they were."""
    remote, home_a, office, job_id = await first_machine(tmp_path)
    space = await office.prepare(job_id)
    for title in ("Docs", "CI"):
        await office.engine.store.write(
            lambda tx, title=title: create_task(
                tx, job_id, title=title, spec=f"Add {title}.", created_by="lead"
            )
        )
    reviewed = await office.workspace.lease(space, 1)  # merged; its phase review goes on
    (reviewed.path / "docs.md").write_text("docs\n")
    await office.workspace.commit_task(reviewed, "Task #1", author=("w", "w@x"))
    assert (await office.workspace.merge_task(space, 1, "Docs")).commit is not None
    await office.engine.store.write(
        lambda tx: tx.execute("UPDATE tasks SET state = 'done' WHERE number = 1")
    )
    slot = await office.workspace.lease(space, 2)
    (slot.path / "done.txt").write_text("committed\n")
    committed = await office.workspace.commit_task(slot, "Task #2", author=("w", "w@x"))
    (slot.path / "draft.txt").write_text("never committed\n")
    (slot.path / "done.txt").write_text("committed, then changed\n")
    (slot.path / "README.md").unlink()
    preserved = await office.preserve(job_id, str(remote), auth=AUTH)
    assert preserved is not None
    assert [n for n, _ in preserved.snapshots] == [2], "only the working slot's"
    assert git(slot.path, "status", "--porcelain") == (
        " D README.md\n M done.txt\n?? draft.txt\n"
    ), "the slot itself is untouched"
    home_b = await move(office, tmp_path, home_a)

    async with on_machine(home_b, job_id) as (store, workspace, recorded):
        assert not workspace.present(recorded)
        rebuilt = await PreservedWork(store, workspace).rebuild(job_id, recorded, auth=AUTH)
        assert workspace.present(rebuilt)
        merged = await workspace.task(rebuilt, 1)
        assert merged is not None
        assert await merged.checkout.branch() is None, "detached at the job branch, as it was"
        assert (merged.path / "docs.md").is_file()
        task = await workspace.task(rebuilt, 2)
        assert task is not None
        assert task.path.is_relative_to(home_b)
        assert await task.checkout.branch() == task_branch(rebuilt, 2)
        assert git(rebuilt.repo, "rev-parse", f"refs/heads/{task.branch}").strip() == (
            committed.commit
        )
        assert (task.path / "draft.txt").read_text() == "never committed\n"
        assert (task.path / "done.txt").read_text() == "committed, then changed\n"
        assert not (task.path / "README.md").exists()
        assert git(task.path, "status", "--porcelain") == (
            " D README.md\n M done.txt\n?? draft.txt\n"
        ), "uncommitted again, as the worker left it"
        slots = await store.read(
            lambda tx: tx.execute("SELECT path FROM worktree_slots ORDER BY path").fetchall()
        )
        assert slots == [(str(merged.path),), (str(task.path),)], "the old machine's are gone"


async def test_a_task_leased_after_the_last_preserve_starts_again_from_the_job_branch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path)
    space = await office.prepare(job_id)
    await office.preserve(job_id, str(remote))
    await office.engine.store.write(
        lambda tx: create_task(tx, job_id, title="CI", spec="Add CI.", created_by="lead")
    )
    slot = await office.workspace.lease(space, 1)
    (slot.path / "late.txt").write_text("after the preserve\n")
    await office.workspace.commit_task(slot, "Task #1", author=("w", "w@x"))
    home_b = await move(office, tmp_path, home_a)

    async with on_machine(home_b, job_id) as (store, workspace, recorded):
        caplog.set_level(logging.WARNING, logger="orchestrator")
        rebuilt = await PreservedWork(store, workspace).rebuild(job_id, recorded, auth=None)
        assert f"job {job_id} task #1: nothing of its branch was preserved" in caplog.text
        task = await workspace.task(rebuilt, 1)
        assert task is not None
        assert await task.checkout.branch() == task_branch(rebuilt, 1)
        assert git(rebuilt.repo, "rev-parse", f"refs/heads/{task.branch}").strip() == (space.base)
        assert not (task.path / "late.txt").exists()


async def test_a_lost_mirror_alone_is_fetched_again_and_the_job_keeps_its_repository(
    tmp_path: Path,
) -> None:
    """Nothing preserved, yet nothing lost: the engine's commits are in the job's own
    repository; only the objects it borrowed come back with the mirror."""
    async with prepared(tmp_path) as (office, remote, job_id, space):
        later = _commit(space.repo, f"refs/heads/{space.branch}", "a.txt", "ours\n")
        shutil.rmtree(space.mirror)
        assert not office.workspace.present(space)
        assert await office.prepare(job_id, auth=AUTH) == space
        assert office.workspace.present(space)
        assert await office.branch_head(job_id) == later
        assert git(space.repo, "cat-file", "-t", space.base).strip() == "commit"


async def test_a_remote_that_fails_is_no_race(tmp_path: Path) -> None:
    async with prepared(tmp_path) as (office, remote, job_id, _):
        with pytest.raises(GitError) as failed:
            await office.preserve(job_id, str(tmp_path / "missing.git"), auth=AUTH)
        assert not isinstance(failed.value, PreservedRaceError)
        assert SECRET not in str(failed.value)
        with pytest.raises(GitError, match="would be read as a git option"):
            await office.preserve(job_id, "--upload-pack=touch /tmp/x")
        assert await office.preserve(99, str(remote)) is None, "no such job: nothing to push"
        space = await office.workspace.job(job_id)
        assert space is not None
        git(space.repo, "update-ref", "-d", f"refs/heads/{space.branch}")
        with pytest.raises(GitError, match=f"job {job_id} has no branch"):
            await office.preserve(job_id, str(remote))


async def test_refs_that_are_not_a_jobs_branches_are_left_alone(tmp_path: Path) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path)
    space = await office.prepare(job_id)
    git(space.repo, "update-ref", f"refs/heads/{space.branch}--task-x", space.base)
    assert await office.preserve(job_id, str(remote)) == Preserved(job_id, space.base)
    notes, elsewhere = f"{WORK_REFS}/{job_id}/notes", f"refs/x/{WORK_REFS}/{job_id}/job"
    for ref in (notes, elsewhere):
        git(remote, "update-ref", ref, space.base)
    assert await work_refs.listed(str(remote), job_id=job_id) == {
        job_id: {f"{WORK_REFS}/{job_id}/job": space.base, notes: space.base}
    }, "ls-remote matches the tails of names too: those are not the job's"
    assert await work_refs.delete(space.repo, str(remote), {}) == ()
    home_b = await move(office, tmp_path, home_a)

    async with on_machine(home_b, job_id) as (store, workspace, recorded):
        work = PreservedWork(store, workspace)
        rebuilt = await work.rebuild(job_id, recorded, auth=None)
        assert git(rebuilt.repo, "for-each-ref", "--format=%(refname)") == (
            f"refs/heads/{space.branch}\n"
        )
        with pytest.raises(OrchestratorError, match="job 99 has no source"):
            await work.rebuild(99, recorded, auth=None)


async def test_a_base_the_source_no_longer_has_fails_the_rebuild_saying_so(
    tmp_path: Path,
) -> None:
    remote, home_a, office, job_id = await first_machine(tmp_path)
    space = await office.prepare(job_id)
    home_b = await move(office, tmp_path, home_a)
    tree = git(remote, "rev-parse", "main^{tree}").strip()
    unrelated = git(remote, "commit-tree", tree, "-m", "history rewritten").strip()
    git(remote, "update-ref", "refs/heads/main", unrelated)  # main force-pushed

    async with on_machine(home_b, job_id) as (store, workspace, recorded):
        with pytest.raises(GitError, match=f"the commit it started from, {space.base}, is not"):
            await PreservedWork(store, workspace).rebuild(job_id, recorded, auth=None)


async def test_preserving_never_forces_a_ref_another_run_moved(tmp_path: Path) -> None:
    async with prepared(tmp_path) as (office, remote, job_id, space):
        first = await office.preserve(job_id, str(remote))
        assert first is not None
        assert first.job == space.base

        later = _commit(space.repo, f"refs/heads/{space.branch}", "a.txt", "ours\n")
        moved = await office.preserve(job_id, str(remote))
        assert moved is not None
        assert moved.job == later, "a fast-forward is pushed"

        theirs = _commit(remote, f"{WORK_REFS}/{job_id}/job", "b.txt", "another run's\n")
        with pytest.raises(PreservedRaceError, match="another run preserved newer work"):
            await office.preserve(job_id, str(remote))
        assert remote_refs(remote, WORK_REFS)[f"{WORK_REFS}/{job_id}/job"] == theirs


async def test_the_run_that_lost_the_race_retries_from_the_winners_refs(tmp_path: Path) -> None:
    """Two runs from one saved state (on machines with the same state directory path): the
    other preserved first; this one's preserve is refused, and so is its retry on the
    winner's state while its own job repositories remain; without them the retry rebuilds
    at the winner's commit."""
    remote, home = bare_remote(tmp_path), tmp_path / "home"
    office = await open_office(home)
    job_id = await start(office, remote)
    await office.prepare(job_id)
    await office.preserve(job_id, str(remote))
    saved = tmp_path / "saved.db"
    await snapshot_store(home / "teaparty.db", saved)
    await office.close()
    shutil.rmtree(home)
    await restore_store(saved, home / "teaparty.db")  # this run, on a fresh machine
    office = await open_office(home)
    try:
        space = await office.prepare(job_id)
        _commit(space.repo, f"refs/heads/{space.branch}", "ours.txt", "ours\n")
        won = _commit(remote, f"{WORK_REFS}/{job_id}/job", "theirs.txt", "the winner's\n")
        with pytest.raises(PreservedRaceError):
            await office.preserve(job_id, str(remote))
    finally:
        await office.close()

    async def retry() -> Office:
        """The winner's state (its store changed nothing here) put in place again."""
        await restore_store(saved, home / "teaparty.db")
        office = await open_office(home)
        await office.prepare(job_id)
        return office

    office = await retry()
    try:
        with pytest.raises(PreservedRaceError):
            await office.preserve(job_id, str(remote))
    finally:
        await office.close()
    shutil.rmtree(home / "repos")
    office = await retry()
    try:
        assert await office.branch_head(job_id) == won
        kept = await office.preserve(job_id, str(remote))
        assert kept is not None
        assert kept.job == won
    finally:
        await office.close()


async def test_forgetting_deletes_only_what_it_listed_and_only_ended_jobs(tmp_path: Path) -> None:
    remote, home = bare_remote(tmp_path), tmp_path / "home"
    office = await open_office(home)
    try:
        job_id = await start(office, remote)
        space = await office.prepare(job_id)
        await office.preserve(job_id, str(remote))
        stranger = f"{WORK_REFS}/99/job"  # a job this store does not know
        git(remote, "update-ref", stranger, space.base)
        assert await office.preserve_all(str(tmp_path / "elsewhere.git")) == (), "not its remote"

        assert await office.forget_ended(str(remote)) == (), "the job is active"
        await withdraw(office, job_id, by="carol")
        await office.close()  # as a runner's engine is, once its store is saved
        assert await forget_ended_work(home, str(remote), auth=AUTH) == (
            f"{WORK_REFS}/{job_id}/job",
        )
        assert remote_refs(remote, WORK_REFS) == {stranger: space.base}
        office = await open_office(home)

        await office.preserve(job_id, str(remote))
        assert await office.forget_preserved(job_id, str(remote)) == (f"{WORK_REFS}/{job_id}/job",)
        assert await office.forget_preserved(job_id, str(remote)) == ()

        with pytest.raises(GitError, match="stale info"):  # the ref moved after it was listed
            await work_refs.delete(space.repo, str(remote), {stranger: "0" * 40})
        assert remote_refs(remote, WORK_REFS) == {stranger: space.base}
    finally:
        await office.close()


def _commit(repo: Path, ref: str, name: str, text: str, *, message: str | None = None) -> str:
    """A commit on `ref` of bare `repo` adding file `name`, made with plumbing."""
    return plumbed(repo, ref, {name: text}, message=message or name)


async def test_a_snapshot_follows_its_slot_and_is_never_forced_over_another_runs(
    tmp_path: Path,
) -> None:
    """A slot's snapshot is replaced as its work changes, deleted once the slot is clean,
    and refused (a lost race) when another run replaced it since this machine saw it; a
    snapshot taken on another commit than the slot's is not put back."""
    async with prepared(tmp_path) as (office, remote, job_id, space):
        await office.engine.store.write(
            lambda tx: create_task(tx, job_id, title="Docs", spec="Add docs.", created_by="lead")
        )
        slot = await office.workspace.lease(space, 1)
        wip = f"{WORK_REFS}/{job_id}/wip-1"
        assert (await office.preserve(job_id, str(remote))).snapshots == ()
        assert wip not in remote_refs(remote, WORK_REFS)

        (slot.path / "a.txt").write_text("one\n")
        first = await office.preserve(job_id, str(remote))
        assert first is not None
        ((n, snapshot),) = first.snapshots
        assert (n, remote_refs(remote, WORK_REFS)[wip]) == (1, snapshot)
        assert git(remote, "show", f"{snapshot}:a.txt") == "one\n"
        (slot.path / "a.txt").write_text("two\n")
        second = await office.preserve(job_id, str(remote))
        assert second is not None
        assert git(remote, "show", f"{wip}:a.txt") == "two\n", "replaced: no fast-forward needed"

        await office.workspace.commit_task(slot, "Task #1", author=("w", "w@x"))
        assert (await office.preserve(job_id, str(remote))).snapshots == ()
        assert wip not in remote_refs(remote, WORK_REFS), "a clean slot leaves no snapshot"

        (slot.path / "b.txt").write_text("ours\n")
        await office.preserve(job_id, str(remote))
        theirs = _commit(remote, wip, "c.txt", "another run's\n")
        (slot.path / "b.txt").write_text("ours, later\n")
        with pytest.raises(PreservedRaceError, match="another run preserved newer work"):
            await office.preserve(job_id, str(remote))
        assert remote_refs(remote, WORK_REFS)[wip] == theirs, "theirs stays"

        git(remote, "fetch", "-q", str(space.repo), f"{task_branch(space, 1)}:refs/heads/old")
        stale = _commit(remote, "refs/heads/old", "d.txt", "on an older commit\n")
        git(space.repo, "fetch", "-q", str(remote), f"{stale}:refs/stale")
        commit_before = git(slot.path, "rev-parse", "HEAD")
        (slot.path / "b.txt").unlink()
        _commit(space.repo, f"refs/heads/{task_branch(space, 1)}", "e.txt", "the slot moved on\n")
        git(slot.path, "reset", "-q", "--hard", task_branch(space, 1))
        assert git(slot.path, "rev-parse", "HEAD") != commit_before
        assert not await work_refs.restore(slot.checkout, stale)
        assert not (slot.path / "d.txt").exists()


async def test_a_merge_in_progress_comes_back_with_its_files(tmp_path: Path) -> None:
    """A base-conflict task's slot mid-merge: its markers and the merge it is in come back,
    so the worker's commit is still the merge that makes the pull request mergeable."""
    remote, home_a, office, job_id = await first_machine(tmp_path)
    space = await office.prepare(job_id)
    await office.engine.store.write(
        lambda tx: create_task(tx, job_id, title="Merge", spec="Merge main.", created_by="lead")
    )
    slot = await office.workspace.lease(space, 1)
    ours = _commit(space.repo, f"refs/heads/{task_branch(space, 1)}", "README.md", "ours\n")
    theirs = _commit(space.repo, f"refs/heads/{space.branch}", "README.md", "theirs\n")
    git(slot.path, "reset", "-q", "--hard", ours)
    with pytest.raises(subprocess.CalledProcessError):  # a conflict: the merge stops
        git(slot.path, "merge", "--no-commit", theirs)
    await office.preserve(job_id, str(remote))
    home_b = await move(office, tmp_path, home_a)

    async with on_machine(home_b, job_id) as (store, workspace, recorded):
        rebuilt = await PreservedWork(store, workspace).rebuild(job_id, recorded, auth=None)
        task = await workspace.task(rebuilt, 1)
        assert task is not None
        assert "<<<<<<<" in (task.path / "README.md").read_text()
        assert (task.checkout.admin / "MERGE_HEAD").read_text().strip() == theirs


async def test_a_new_job_continues_from_its_branch_a_run_that_lost_its_state_pushed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A runner killed after it pushed the job branch but before it saved its state: the
    next run starts the job again (its label read again) and continues from that branch, so
    its push is a fast-forward. A branch already merged into main is history instead."""
    remote = bare_remote(tmp_path)
    lost = await open_office(tmp_path / "home-lost")
    job_id = await start(lost, remote)
    space = await lost.prepare(job_id)
    made = marked("Merge task #1: ci", space.mark)  # as the engine's own commits carry it
    pushed = _commit(space.repo, f"refs/heads/{space.branch}", "ci.txt", "lost\n", message=made)
    await lost.workspace.publish(space, str(remote))
    await lost.close()
    shutil.rmtree(tmp_path / "home-lost")  # the state went with it

    office = await open_office(tmp_path / "home")
    try:
        caplog.set_level(logging.WARNING, logger="orchestrator")
        assert await start(office, remote) == job_id
        again = await office.prepare(job_id)
        assert git(again.repo, "rev-parse", f"refs/heads/{again.branch}").strip() == pushed
        assert again.base == git(remote, "rev-parse", "main").strip()
        assert "is already on the source" in caplog.text
        await office.workspace.publish(again, str(remote))  # a fast-forward: no error
    finally:
        await office.close()

    git(remote, "update-ref", "refs/heads/main", pushed)  # merged: the branch is history
    main = _commit(remote, "refs/heads/main", "after.txt", "main moved on\n")
    shutil.rmtree(tmp_path / "home")
    fresh = await open_office(tmp_path / "home")
    try:
        assert await start(fresh, remote) == job_id
        third = await fresh.prepare(job_id)
        assert git(third.repo, "rev-parse", f"refs/heads/{third.branch}").strip() == main
        assert third.base == main, "started at main, which holds the old branch"
    finally:
        await fresh.close()


async def test_a_new_job_leaves_a_branch_of_its_name_it_did_not_make(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The source has the branch the job wants, made by another state directory's job (its
    commits carry that job's mark) or by a person (none): the job takes the next free name
    and never moves the other branch."""
    remote = bare_remote(tmp_path)
    main = git(remote, "rev-parse", "main").strip()
    wanted = "teaparty/job-1-ci"
    person = _commit(remote, "refs/heads/main", "mine.txt", "a person's\n")
    git(remote, "update-ref", "refs/heads/main", main)  # main as it was; the branch is theirs
    git(remote, "update-ref", f"refs/heads/{wanted}", person)
    other = marked("Merge task #1: ci", job_mark("local:elsewhere#1"))
    elsewhere = _commit(remote, "refs/heads/main", "other.txt", "theirs\n", message=other)
    git(remote, "update-ref", "refs/heads/main", main)
    git(remote, "update-ref", f"refs/heads/{wanted}-2", elsewhere)

    office = await open_office(tmp_path / "home")
    try:
        caplog.set_level(logging.WARNING, logger="orchestrator")
        job_id = await start(office, remote)
        space = await office.prepare(job_id)
        assert space.branch == f"{wanted}-3"
        assert git(space.repo, "rev-parse", f"refs/heads/{space.branch}").strip() == main
        assert "this job did not make" in caplog.text
        _commit(space.repo, f"refs/heads/{space.branch}", "ci.txt", "the job's\n")
        await office.workspace.publish(space, str(remote))
    finally:
        await office.close()
    assert git(remote, "rev-parse", wanted).strip() == person, "never moved"
    assert git(remote, "rev-parse", f"{wanted}-2").strip() == elsewhere, "never moved"
    assert git(remote, "rev-parse", f"{wanted}-3").strip() != main
