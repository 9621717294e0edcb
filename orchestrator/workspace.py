"""Where jobs work on disk: a bare mirror per repository, a worktree per job, and recycled
task worktrees.

    {home}/repos/{name}/mirror.git                          fetched from the repository
    {home}/repos/{name}/jobs/job-{id}--{slug}/worktree      the job branch, synced at merges
    {home}/repos/{name}/slots/slot-{n}                      task worktrees, one task at a time

Task worktrees are recycled, not created per task: on this machine's disk a full checkout
costs seconds to create and remove, while switching a used worktree to a new branch
touches only the files that differ (bench/teams.py, docs/performance.md). A slot is leased
to one task in the store; the task's branch stays checked out there until the task ends,
so a restarted engine finds the worker's uncommitted files where it left them.
"""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.store import Store, Tx, now
from orchestrator.worktrees import (
    IDENTITY,
    GitError,
    Merge,
    ensure_branch,
    ensure_worktree,
    git,
    merge,
    remove_worktree,
    rev,
)

HUNK_CONTEXT = 3
HUNKS_MAX_CHARS = 6_000


@dataclass(frozen=True)
class JobSpace:
    """A job's branch, the commit it started from, and its worktree."""

    job_id: int
    mirror: Path
    branch: str
    base: str
    path: Path


@dataclass(frozen=True)
class TaskSpace:
    """A task's branch and the slot it is checked out in."""

    job: JobSpace
    number: int
    branch: str
    path: Path


def task_branch(job: JobSpace, number: int) -> str:
    """The branch of task `number` of a job."""
    return f"{job.branch}--task-{number}"


class Workspace:
    """Mirrors, job worktrees and task slots under one state directory."""

    def __init__(self, home: Path, store: Store) -> None:
        self.home = home
        self.store = store
        # Per mirror: git's worktree bookkeeping is not safe under concurrent add/prune,
        # and two merges into one job branch must not race on its ref.
        self._locks: dict[Path, asyncio.Lock] = {}

    def _lock(self, mirror: Path) -> asyncio.Lock:
        return self._locks.setdefault(mirror, asyncio.Lock())

    def repo_dir(self, name: str) -> Path:
        """The directory of one repository's mirror, jobs and slots."""
        return self.home / "repos" / name

    async def mirror(self, name: str, source: str, *, env: Mapping[str, str] | None = None) -> Path:
        """The bare mirror of `source` (a URL or path), cloned once and fetched each time.

        The mirror fetches the repository's branches into refs/remotes/origin/*, so its own
        refs/heads (job and task branches) are never overwritten by a fetch.
        """
        path = self.repo_dir(name) / "mirror.git"
        if not (path / "HEAD").exists():
            partial = path.with_name("mirror.git.partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            await git(partial.parent, "clone", "--bare", "--quiet", source, str(partial), env=env)
            await git(
                partial, "config", "remote.origin.fetch", "+refs/heads/*:refs/remotes/origin/*"
            )
            await git(partial, "config", "gc.auto", "0")
            partial.rename(path)  # a crash before this leaves only a .partial to redo
        await git(path, "fetch", "--quiet", "--prune", "origin", env=env)
        return path

    async def open_job(
        self, job_id: int, *, mirror: Path, branch: str, start: str, slug: str
    ) -> JobSpace:
        """The job's branch (made at `start` when new) and worktree; idempotent."""
        stored = await self.job(job_id)
        if stored is not None:  # resumed (or reopened after it ended): the worktree is back
            async with self._lock(stored.mirror):
                await ensure_worktree(stored.mirror, stored.path, stored.branch, stored.base)
            await self.store.write(
                lambda tx: tx.execute(
                    "UPDATE job_workspaces SET removed = 0 WHERE job_id = ?", (job_id,)
                )
            )
            return stored
        start_commit = await rev(mirror, start)
        if start_commit is None:
            raise GitError(f"cannot start job {job_id}: {start!r} names no commit in {mirror}")
        await ensure_branch(mirror, branch, start_commit)
        _, base = await git(mirror, "merge-base", branch, start_commit)
        path = mirror.parent / "jobs" / f"job-{job_id}--{slug}" / "worktree"
        async with self._lock(mirror):
            await ensure_worktree(mirror, path, branch, start_commit)
        space = JobSpace(job_id, mirror, branch, base.strip(), path)
        await self.store.write(
            lambda tx: tx.execute(
                "INSERT OR IGNORE INTO job_workspaces (job_id, mirror, branch, base, path)"
                " VALUES (?, ?, ?, ?, ?)",
                (job_id, str(mirror), branch, space.base, str(path)),
            )
        )
        return space

    async def job(self, job_id: int) -> JobSpace | None:
        """The job's workspace as recorded, or None before open_job."""
        row = await self.store.read(
            lambda tx: tx.execute(
                "SELECT mirror, branch, base, path FROM job_workspaces WHERE job_id = ?",
                (job_id,),
            ).fetchone()
        )
        if row is None:
            return None
        return JobSpace(job_id, Path(row[0]), row[1], row[2], Path(row[3]))

    async def lease(self, job: JobSpace, number: int) -> TaskSpace:
        """A slot with task `number`'s branch checked out (from the job branch when new).

        A slot already leased to the task is returned as it is, uncommitted work included.
        """
        branch = task_branch(job, number)
        slots = job.mirror.parent / "slots"
        path = Path(await self.store.write(lambda tx: _lease(tx, job, number, slots)))
        space = TaskSpace(job, number, branch, path)
        if not (path / ".git").exists():
            shutil.rmtree(path, ignore_errors=True)
            path.parent.mkdir(parents=True, exist_ok=True)
            async with self._lock(job.mirror):
                await git(job.mirror, "worktree", "prune")
                await git(
                    job.mirror, "worktree", "add", "--quiet", "--detach", str(path), job.branch
                )
        _, head = await git(path, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if head.strip() == branch:
            return space
        if (await git_dir(path) / "MERGE_HEAD").exists():  # a resolution left unfinished
            await git(path, "merge", "--abort")
        await git(path, "clean", "-q", "-fdx")  # checkout -f below discards tracked changes
        if await rev(job.mirror, f"refs/heads/{branch}") is None:
            await git(path, "checkout", "--quiet", "-f", "-b", branch, job.branch)
        else:
            await git(path, "checkout", "--quiet", "-f", branch)
        return space

    async def task(self, job: JobSpace, number: int) -> TaskSpace | None:
        """Task `number`'s slot while it is leased, else None."""
        row = await self.store.read(lambda tx: _slot_of(tx, job.job_id, number))
        return None if row is None else TaskSpace(job, number, task_branch(job, number), Path(row))

    async def release(self, job: JobSpace, number: int) -> None:
        """Give the task's slot back; its branch stays, its checkout waits for the next task."""
        path = await self.store.read(lambda tx: _slot_of(tx, job.job_id, number))
        if path is None:
            return
        if (Path(path) / ".git").exists():  # detach without re-reading every file
            _, head = await git(Path(path), "rev-parse", "HEAD")
            await git(Path(path), "update-ref", "--no-deref", "HEAD", head.strip())
        await self.store.write(
            lambda tx: tx.execute(
                "UPDATE worktree_slots SET task_id = NULL, leased_at = NULL WHERE path = ?",
                (path,),
            )
        )

    async def merge_task(self, job: JobSpace, number: int, title: str) -> Merge:
        """Merge the task's branch into the job branch (--no-ff, no checkout), then sync."""
        async with self._lock(job.mirror):
            merged = await merge(
                job.mirror,
                into=job.branch,
                source=f"refs/heads/{task_branch(job, number)}",
                message=f"Merge task #{number}: {title}",
                identity=IDENTITY,
            )
            if merged.commit is not None:
                await self.sync(job)
        return merged

    async def sync(self, job: JobSpace) -> None:
        """Bring the job worktree's files to the job branch after the engine moved it."""
        if (job.path / ".git").exists():
            await git(job.path, "reset", "--quiet", "--hard")

    async def conflict_hunks(self, job: JobSpace, merged: Merge) -> str:
        """The conflicting regions of each file, from the tree git merge-tree wrote."""
        if merged.tree is None:
            return ""
        parts: list[str] = []
        for name in merged.conflicts:
            code, text = await git(
                job.mirror, "cat-file", "-p", f"{merged.tree}:{name}", check=False
            )
            hunks = _marker_regions(text) if code == 0 else "(not a text file)"
            parts.append(f"--- {name}\n{hunks}")
        joined = "\n".join(parts)
        if len(joined) > HUNKS_MAX_CHARS:
            joined = joined[:HUNKS_MAX_CHARS] + "\n… (more conflicts; see the files)"
        return joined

    async def publish(
        self, job: JobSpace, remote: str, *, env: Mapping[str, str] | None = None
    ) -> None:
        """Push the job branch to `remote` (a URL or path) under the same name."""
        ref = f"refs/heads/{job.branch}"
        await git(job.mirror, "push", "--quiet", remote, f"{ref}:{ref}", env=env)

    async def close_job(self, job: JobSpace) -> None:
        """Remove the job worktree and give back its tasks' slots; the branches stay."""
        numbers = await self.store.read(
            lambda tx: [
                n
                for (n,) in tx.execute(
                    "SELECT t.number FROM worktree_slots s JOIN tasks t ON t.task_id = s.task_id"
                    " WHERE t.job_id = ?",
                    (job.job_id,),
                )
            ]
        )
        for number in numbers:
            await self.release(job, number)
        async with self._lock(job.mirror):
            await remove_worktree(job.mirror, job.path)
        shutil.rmtree(job.path.parent, ignore_errors=True)
        await self.store.write(
            lambda tx: tx.execute(
                "UPDATE job_workspaces SET removed = 1 WHERE job_id = ?", (job.job_id,)
            )
        )

    async def recover(self) -> list[str]:
        """Clean up after a crash: slots of tasks no mini-team works on, worktrees of ended jobs.

        Returns what it cleaned, one line each.
        """
        cleaned: list[str] = []
        slots, ended, mirrors = await self.store.read(_orphans)
        for job_id, number in slots:
            job = await self.job(job_id)
            if job is not None:
                await self.release(job, number)
                cleaned.append(f"released the slot of job {job_id} task #{number}")
        for job_id in ended:
            job = await self.job(job_id)
            if job is not None:
                await self.close_job(job)
                cleaned.append(f"removed the worktree of ended job {job_id}")
        for mirror in mirrors:
            await git(Path(mirror), "worktree", "prune", check=False)  # gone: nothing to prune
        return cleaned


async def git_dir(path: Path) -> Path:
    """The git directory of a worktree."""
    _, out = await git(path, "rev-parse", "--absolute-git-dir")
    return Path(out.strip())


def _lease(tx: Tx, job: JobSpace, number: int, slots: Path) -> str:
    task = tx.execute(
        "SELECT task_id FROM tasks WHERE job_id = ? AND number = ?", (job.job_id, number)
    ).fetchone()
    if task is None:
        raise GitError(f"job {job.job_id} has no task #{number} to give a worktree")
    held = tx.execute("SELECT path FROM worktree_slots WHERE task_id = ?", task).fetchone()
    if held is not None:
        return str(held[0])
    free = tx.execute(
        "SELECT path FROM worktree_slots WHERE mirror = ? AND task_id IS NULL ORDER BY path",
        (str(job.mirror),),
    ).fetchone()
    if free is None:
        (count,) = tx.execute(
            "SELECT count(*) FROM worktree_slots WHERE mirror = ?", (str(job.mirror),)
        ).fetchone()
        path = str(slots / f"slot-{count + 1}")
        tx.execute(
            "INSERT INTO worktree_slots (path, mirror) VALUES (?, ?)", (path, str(job.mirror))
        )
    else:
        path = str(free[0])
    tx.execute(
        "UPDATE worktree_slots SET task_id = ?, leased_at = ? WHERE path = ?",
        (task[0], now(), path),
    )
    return path


def _slot_of(tx: Tx, job_id: int, number: int) -> str | None:
    row = tx.execute(
        "SELECT s.path FROM worktree_slots s JOIN tasks t ON t.task_id = s.task_id"
        " WHERE t.job_id = ? AND t.number = ?",
        (job_id, number),
    ).fetchone()
    return None if row is None else str(row[0])


def _orphans(tx: Tx) -> tuple[list[tuple[int, int]], list[int], list[str]]:
    slots: list[tuple[int, int]] = tx.execute(
        "SELECT t.job_id, t.number FROM worktree_slots s JOIN tasks t ON t.task_id = s.task_id"
        " WHERE NOT EXISTS (SELECT 1 FROM conversations c WHERE c.task_id = t.task_id"
        " AND c.kind = 'task' AND c.state = 'active')"
    ).fetchall()
    jobs = tx.execute(
        "SELECT w.job_id FROM job_workspaces w JOIN jobs j ON j.job_id = w.job_id"
        " WHERE w.removed = 0 AND j.state != 'active'"
    ).fetchall()
    mirrors = tx.execute("SELECT DISTINCT mirror FROM job_workspaces").fetchall()
    return slots, [row[0] for row in jobs], [row[0] for row in mirrors]


def _marker_regions(text: str) -> str:
    """The lines from each `<<<<<<<` to its `>>>>>>>`, with a little context around."""
    lines = text.splitlines()
    keep: set[int] = set()
    start: int | None = None
    for index, line in enumerate(lines):
        if line.startswith("<<<<<<<"):
            start = index
        elif line.startswith(">>>>>>>") and start is not None:
            keep.update(
                range(max(0, start - HUNK_CONTEXT), min(len(lines), index + 1 + HUNK_CONTEXT))
            )
            start = None
    out: list[str] = []
    previous = -2
    for index in sorted(keep):
        if index != previous + 1 and out:
            out.append("…")
        out.append(f"{index + 1:>5}  {lines[index]}")
        previous = index
    return "\n".join(out) or "(no conflict markers: a rename, delete or binary conflict)"
