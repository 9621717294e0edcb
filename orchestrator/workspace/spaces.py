"""A job's workspace and its task slots as records, and where the store keeps them.

`JobSpace` is a job's repository, branch, base commit and worktree (`job_workspaces`); a
`TaskSpace` is a task's branch checked out in one of the job's slots, leased to the task in
`worktree_slots` by the task board's id for it (`TaskIds`: the board sits above the
workspace, and the composition root hands it in). What the workspace does on disk with
them is workspace/layout.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from orchestrator.bus import jobs as job_rows
from orchestrator.bus.transactions import working_on
from orchestrator.core.messages import ConversationKind
from orchestrator.store.sqlite import Tx, now
from orchestrator.workspace.git import Checkout, GitError


@dataclass(frozen=True)
class JobSpace:
    """A job's repository, branch, the commit it started from, and its worktree."""

    job_id: int
    repo: Path
    mirror: Path
    branch: str
    base: str
    path: Path
    mark: str | None = None  # on the engine's commits (None: a job recorded before marks)

    @property
    def checkout(self) -> Checkout:
        """The job worktree, reached through its admin directory."""
        return Checkout(self.repo, self.path)

    @property
    def readable(self) -> tuple[Path, ...]:
        """What an agent of this job may read besides its worktree: the git data it needs."""
        return (self.repo, self.mirror / "objects")


@dataclass(frozen=True)
class TaskSpace:
    """A task's branch and the slot it is checked out in."""

    job: JobSpace
    number: int
    branch: str
    path: Path

    @property
    def checkout(self) -> Checkout:
        """The task's worktree, reached through its admin directory."""
        return Checkout(self.job.repo, self.path)


class TaskIds(Protocol):
    """The task board's side of a slot's lease: slots are leased by the tasks' stored ids.

    The board (teams/board.py) sits above the workspace; the composition root hands that
    module in, which has these functions."""

    def task_id(self, tx: Tx, job_id: int, number: int) -> int | None:
        """The stored id of task `number` of the job (None: no such task)."""

    def locate(self, tx: Tx, task_id: int) -> tuple[int, int] | None:
        """The job and number of the task stored as `task_id` (None: no such task)."""

    def ids_of(self, tx: Tx, job_id: int) -> list[int]:
        """The stored ids of every task of the job."""

    def is_done(self, tx: Tx, task_id: int) -> bool:
        """Whether the task stored as `task_id` is done (merged)."""


def task_branch(job: JobSpace, number: int) -> str:
    """The branch of task `number` of a job."""
    return f"{job.branch}--task-{number}"


def upgraded(tx: Tx, tasks: TaskIds, job_id: int, repo: Path) -> None:
    tx.execute(
        "UPDATE worktree_slots SET task_id = NULL, leased_at = NULL WHERE task_id IN"
        " (SELECT value FROM json_each(?))",
        (json.dumps(tasks.ids_of(tx, job_id)),),
    )
    tx.execute("UPDATE job_workspaces SET repo = ? WHERE job_id = ?", (str(repo), job_id))


def forget_slots(tx: Tx, mirror: str) -> None:
    tx.execute("DELETE FROM worktree_slots WHERE mirror = ?", (mirror,))


def closed(tx: Tx, job: JobSpace) -> None:
    tx.execute("DELETE FROM worktree_slots WHERE mirror = ?", (str(job.repo),))
    tx.execute("UPDATE job_workspaces SET removed = 1 WHERE job_id = ?", (job.job_id,))


def lease(tx: Tx, tasks: TaskIds, job: JobSpace, number: int, slots: Path) -> str:
    task = tasks.task_id(tx, job.job_id, number)
    if task is None:
        raise GitError(f"job {job.job_id} has no task #{number} to give a worktree")
    held = tx.execute("SELECT path FROM worktree_slots WHERE task_id = ?", (task,)).fetchone()
    if held is not None:
        return str(held[0])
    free = tx.execute(
        "SELECT path FROM worktree_slots WHERE mirror = ? AND task_id IS NULL ORDER BY path",
        (str(job.repo),),
    ).fetchone()
    if free is None:
        (count,) = tx.execute(
            "SELECT count(*) FROM worktree_slots WHERE mirror = ?", (str(job.repo),)
        ).fetchone()
        path = str(slots / f"slot-{count + 1}")
        tx.execute("INSERT INTO worktree_slots (path, mirror) VALUES (?, ?)", (path, str(job.repo)))
    else:
        path = str(free[0])
    tx.execute(
        "UPDATE worktree_slots SET task_id = ?, leased_at = ? WHERE path = ?",
        (task, now(), path),
    )
    return path


def slot_of(tx: Tx, tasks: TaskIds, job_id: int, number: int) -> str | None:
    task = tasks.task_id(tx, job_id, number)
    if task is None:
        return None
    row = tx.execute("SELECT path FROM worktree_slots WHERE task_id = ?", (task,)).fetchone()
    return None if row is None else str(row[0])


def _leased(tx: Tx, tasks: TaskIds, *mirrors: str) -> list[tuple[int, tuple[int, int]]]:
    """The slots leased to a task (of `mirrors`' repositories, if named): each task's stored
    id, and its job and number, in that order."""
    rows = tx.execute(
        "SELECT task_id FROM worktree_slots WHERE task_id IS NOT NULL"
        " AND (? = 0 OR mirror IN (SELECT value FROM json_each(?)))",
        (len(mirrors), json.dumps(mirrors)),
    ).fetchall()
    found = ((int(task), tasks.locate(tx, int(task))) for (task,) in rows)
    return sorted(((task, at) for task, at in found if at is not None), key=lambda t: t[1])


def orphans(tx: Tx, tasks: TaskIds) -> tuple[list[tuple[int, int]], list[int], list[str]]:
    slots = [
        at for task, at in _leased(tx, tasks) if not working_on(tx, task, ConversationKind.TASK)
    ]
    kept = tx.execute("SELECT job_id FROM job_workspaces WHERE removed = 0").fetchall()
    ended = [
        int(job_id)
        for (job_id,) in kept
        if (job := job_rows.get(tx, int(job_id))) is not None and job.state == "complete"
    ]
    legacy = tx.execute(
        "SELECT DISTINCT mirror FROM worktree_slots WHERE mirror NOT IN"
        " (SELECT repo FROM job_workspaces WHERE repo IS NOT NULL)"
    ).fetchall()
    return slots, ended, [row[0] for row in legacy]


def record_job(tx: Tx, space: JobSpace) -> int | None:
    """Record a job's workspace; the job already holding its branch in its repository, if any."""
    holder = tx.execute(
        "SELECT job_id FROM job_workspaces WHERE mirror = ? AND branch = ? AND job_id != ?",
        (str(space.mirror), space.branch, space.job_id),
    ).fetchone()
    if holder is not None:
        return int(holder[0])
    tx.execute(
        "INSERT INTO job_workspaces (job_id, mirror, repo, branch, base, path, mark)"
        " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
        (
            space.job_id,
            str(space.mirror),
            str(space.repo),
            space.branch,
            space.base,
            str(space.path),
            space.mark,
        ),
    )
    return None


def record_moved(
    tx: Tx, tasks: TaskIds, recorded: JobSpace, space: JobSpace
) -> list[tuple[int, bool]]:
    """Record the job's workspace at its new paths; the tasks whose slots were leased, by
    number, and whether each is merged (their rows are dropped: the slots are leased again)."""
    repos = (str(recorded.repo), str(space.repo))
    leased = [(number, tasks.is_done(tx, task)) for task, (_, number) in _leased(tx, tasks, *repos)]
    tx.execute("DELETE FROM worktree_slots WHERE mirror IN (?, ?)", repos)
    tx.execute(
        "UPDATE job_workspaces SET mirror = ?, repo = ?, path = ?, removed = 0 WHERE job_id = ?",
        (str(space.mirror), str(space.repo), str(space.path), space.job_id),
    )
    return leased


def leases(tx: Tx, mirror: str) -> dict[int, str]:
    """The slots of `mirror` leased to a task: the task's id (teams/board.py's) to the path."""
    rows = tx.execute(
        "SELECT task_id, path FROM worktree_slots WHERE mirror = ? AND task_id IS NOT NULL",
        (mirror,),
    ).fetchall()
    return {int(task_id): str(path) for task_id, path in rows}


def forget_mirror(tx: Tx, mirror: str) -> None:
    """The workspaces of every job from `mirror` are gone, and their repositories' slots."""
    repos = [
        str(repo)
        for (repo,) in tx.execute(
            "SELECT repo FROM job_workspaces WHERE mirror = ? AND repo IS NOT NULL", (mirror,)
        )
    ]
    for repo in repos:
        tx.execute("DELETE FROM worktree_slots WHERE mirror = ?", (repo,))
    tx.execute("UPDATE job_workspaces SET removed = 1 WHERE mirror = ?", (mirror,))


@dataclass(frozen=True)
class Recorded:
    """A job's workspace as recorded: its mirror, repository and worktree, and whether it
    was removed."""

    job_id: int
    mirror: str
    repo: str | None
    branch: str
    path: str
    removed: bool


_RECORDED = "SELECT job_id, mirror, repo, branch, path, removed FROM job_workspaces"


def recorded(tx: Tx) -> list[Recorded]:
    """Every job's recorded workspace, by job id."""
    rows = tx.execute(f"{_RECORDED} ORDER BY job_id").fetchall()
    return [_recorded(*row) for row in rows]


def recorded_of(tx: Tx, job_id: int) -> Recorded | None:
    """The job's recorded workspace (None: none recorded)."""
    row = tx.execute(f"{_RECORDED} WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else _recorded(*row)


def _recorded(
    job_id: int, mirror: str, repo: str | None, branch: str, path: str, removed: int
) -> Recorded:
    return Recorded(job_id, mirror, repo, branch, path, bool(removed))


def branch_of(tx: Tx, job_id: int) -> str | None:
    """The job branch of the job's recorded workspace (None: none recorded)."""
    row = tx.execute("SELECT branch FROM job_workspaces WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None else row[0]


def job_space(tx: Tx, job_id: int) -> tuple[JobSpace, bool] | None:
    """The job's workspace as recorded, and whether it has a repository of its own (False:
    recorded before jobs had one; its `repo` is where it goes, beside the worktree); None:
    none recorded."""
    row = tx.execute(
        "SELECT mirror, repo, branch, base, path, mark FROM job_workspaces WHERE job_id = ?",
        (job_id,),
    ).fetchone()
    if row is None:
        return None
    mirror, repo, branch, base, path, mark = row
    own = Path(path).parent / "repo.git" if repo is None else Path(repo)
    return JobSpace(job_id, own, Path(mirror), branch, base, Path(path), mark), repo is not None


def base_of(tx: Tx, job_id: int) -> str | None:
    """The commit the job started from, as its workspace recorded it (None: none recorded)."""
    row = tx.execute("SELECT base FROM job_workspaces WHERE job_id = ?", (job_id,)).fetchone()
    return None if row is None or row[0] is None else str(row[0])


def reopened(tx: Tx, job_id: int) -> None:
    """The job's worktree is back."""
    tx.execute("UPDATE job_workspaces SET removed = 0 WHERE job_id = ?", (job_id,))


def freed(tx: Tx, path: str) -> None:
    """The slot at `path` is given back."""
    tx.execute("UPDATE worktree_slots SET task_id = NULL, leased_at = NULL WHERE path = ?", (path,))
