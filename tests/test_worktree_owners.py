"""Whose files a task slot holds when the engine is root: its own user's, one per slot.

The workspace hands a slot's files to the slot's user when it leases it (and after every
engine write); a job's closed worktrees give their ids back; a restarted engine, which
hands out ids afresh, hands the files over again. What the engine commits is git's: no
owner goes into a commit.
"""

from __future__ import annotations

import os
from contextlib import AbstractAsyncContextManager
from functools import partial
from pathlib import Path

import demo_office
import pytest
from demo_office import local_source
from local_repo import make_repo

from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox
from orchestrator.sandbox.identities import Identities
from orchestrator.teams.board import create_task
from orchestrator.workspace.owners import chown_paths
from orchestrator.workspace.spaces import TaskSpace

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="users are given out by a root engine")
DECIDER = "humans: {decider: alice}\n"  # project "w"
OWNER = (5300, 5300)


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "origin")


def office_with(home: Path, first: int) -> AbstractAsyncContextManager[Office]:
    """An office over `home` whose slots' users start at `first`; closed after."""
    # No call runs here: the sandbox only says who agents would run as.
    sandbox = Sandbox("bwrap", "test", run_as=(65534, 65534), uids=Identities(first, first + 9))
    opening = demo_office.open_office(home, DECIDER, DemoModel(), sandbox=sandbox, name="w")
    return demo_office.closed_after(opening)


async def start(office: Office, origin: Path, number: int) -> JobHandle:
    job = await office.start_here(
        project="w",
        key=f"local:{number}",
        title="t",
        brief="b",
        source=local_source(origin, "t", repo="local/widgets"),
    )
    for title in ("one", "two"):
        await office.engine.store.write(
            partial(create_task, job_id=job.job_id, title=title, spec="s", created_by="l")
        )
    return job


async def first_slot(office: Office, origin: Path) -> tuple[JobHandle, TaskSpace]:
    """Job 1 on `origin` and the slot leased for its first task."""
    job = await start(office, origin, 1)
    return job, await office.workspace.lease(job.space, 1)


def owners(path: Path) -> set[tuple[int, int]]:
    found = set()
    for folder, dirs, files in os.walk(path):
        for name in [*dirs, *files, ""]:
            status = os.lstat(os.path.join(folder, name) if name else folder)
            found.add((status.st_uid, status.st_gid))
    return found


async def test_each_slot_is_its_own_users_and_ids_come_back(tmp_path: Path, origin: Path) -> None:
    async with office_with(tmp_path / "home", 5000) as office:
        job, one = await first_slot(office, origin)
        two = await office.workspace.lease(job.space, 2)
        assert owners(one.path) == {(5000, 5000)}
        assert owners(two.path) == {(5001, 5001)}
        assert office.workspace.owner_of(job.space.path) == (5002, 5002)
        assert os.stat(job.space.repo).st_uid == 0, "the job's git data stays the engine's"
        await office.workspace.close_job(job.space)
        later = await start(office, origin, 2)
        again = await office.workspace.lease(later.space, 1)
        assert owners(again.path) == {(5000, 5000)}, "a closed job's ids are free again"


async def test_a_restarted_engine_hands_a_slot_to_the_user_it_gives_it(
    tmp_path: Path, origin: Path
) -> None:
    async with office_with(tmp_path / "home", 5000) as office:
        job, slot = await first_slot(office, origin)
        (slot.path / "work.txt").write_text("left by the worker\n")
        await office.workspace.hand_over(slot.path)
        assert owners(slot.path) == {(5000, 5000)}
    async with office_with(tmp_path / "home", 6000) as office:
        space = await office.workspace.job(job.job_id)
        assert space is not None
        again = await office.workspace.lease(space, 1)
        assert again.path == slot.path
        assert owners(again.path) == {(6000, 6000)}


async def test_a_recycled_slot_is_all_its_users_after_the_engine_switches_it(
    tmp_path: Path, origin: Path
) -> None:
    """The engine hands over only what its git wrote when it recycles a slot: the files of the
    new branch (in directories it made) and the tracked files the last worker left changed."""
    async with office_with(tmp_path / "home", 5000) as office:
        job = await start(office, origin, 1)
        await office.engine.store.write(
            partial(create_task, job_id=job.job_id, title="three", spec="s", created_by="l")
        )
        one = await office.workspace.lease(job.space, 1)
        two = await office.workspace.lease(job.space, 2)
        (two.path / "new" / "deep").mkdir(parents=True)
        (two.path / "new" / "deep" / "file.txt").write_text("from task two\n")
        await office.workspace.commit_task(two, "two", author=("w", "w@x"))
        assert (await office.workspace.merge_task(job.space, 2, "two")).commit
        (one.path / "README.md").write_text("left changed by task one's worker\n")
        (one.path / "gone").mkdir()  # and a directory of its own, which clean removes
        os.chown(one.path / "gone", 5000, 5000)
        await office.workspace.release(job.space, 1)
        three = await office.workspace.lease(job.space, 3)
        assert three.path == one.path, "the free slot is recycled"
        assert (three.path / "new" / "deep" / "file.txt").is_file()
        assert (three.path / "README.md").read_text() == "widgets\n"
        assert owners(three.path) == {(5000, 5000)}


def test_handing_over_named_paths_never_follows_a_symlink(tmp_path: Path) -> None:
    """A path git names may lead through a symlink an agent put in place of a directory."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root's\n")
    root = tmp_path / "slot"
    (root / "real").mkdir(parents=True)
    (root / "real" / "file.txt").write_text("x\n")
    (root / "link").symlink_to(outside)
    chown_paths(root, ["link/passwd", "real/file.txt", "link", "missing/x", "../outside"], OWNER)
    assert os.stat(outside / "passwd").st_uid == 0
    assert os.stat(outside).st_uid == 0
    assert os.lstat(root / "link").st_uid == OWNER[0], "the symlink itself is the agent's"
    assert os.lstat(root / "real").st_uid == OWNER[0]
    assert os.lstat(root / "real" / "file.txt").st_uid == OWNER[0]


async def test_an_engine_write_that_names_no_paths_hands_the_whole_slot_over_next(
    tmp_path: Path, origin: Path
) -> None:
    async with office_with(tmp_path / "home", 5000) as office:
        job, slot = await first_slot(office, origin)
        (slot.path / "engine.txt").write_text("written by the engine, as root\n")
        office.workspace.wrote(slot.path)
        await office.workspace.ensure_handed(slot.path)
        assert owners(slot.path) == {(5000, 5000)}
