"""`teaparty jobs clean`: what ended jobs leave on disk, planned, then removed.

Three kinds of leftovers, under the state directory only (never in a person's repository):
- the worktrees (job and task) of jobs that ended, done or cancelled;
- a cancelled job's own repository, with its `teaparty/job-*` branches (a done job's
  branches were delivered, and stay);
- a mirror no live job uses (an active job, failed or parked ones included, may need it
  again), with its repository's directory: the repositories of the ended jobs there
  borrow the mirror's objects, so they go with it.
The plan is read first and shown; `clean` removes what it lists and says what it removed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.bus import jobs as job_rows
from orchestrator.jobs import sources
from orchestrator.jobs.office import Office
from orchestrator.store.sqlite import Tx
from orchestrator.workspace import spaces as workspaces
from orchestrator.workspace.git import git

RemovalKind = Literal["worktree", "branch", "job repository", "mirror"]


@dataclass(frozen=True)
class Removal:
    """One thing `clean` removes: its kind, where it is, the job it was for, a branch name."""

    kind: RemovalKind
    path: str
    job_id: int | None = None
    branch: str | None = None


@dataclass(frozen=True)
class _Space:
    job_id: int
    state: str
    mirror: str
    repo: str | None
    path: str
    removed: bool


async def plan_clean(office: Office) -> list[Removal]:
    """What `clean` would remove now, in the order it removes it."""
    spaces, used = await office.engine.store.read(_spaces)
    home = office.workspace.home
    used |= {
        _real(office.workspace.repo_dir(name) / "mirror.git") for name in await _sources(office)
    }
    removals = _worktrees(spaces)
    folders = _cancelled(spaces)
    for space, folder, repo in folders:
        removals += await _branches(space, repo)
        removals.append(Removal("job repository", str(folder), space.job_id))
    return removals + _mirrors(home, spaces, used, gone={str(f) for _, f, _ in folders})


def _worktrees(spaces: list[_Space]) -> list[Removal]:
    """The job and task worktrees of ended jobs still on disk."""
    found: list[Removal] = []
    for space in spaces:
        if space.state != "active" and not space.removed:
            slots = sorted((Path(space.path).parent / "slots").glob("slot-*"))
            found += [
                Removal("worktree", str(path), space.job_id)
                for path in [Path(space.path), *slots]
                if path.exists()
            ]
    return found


def _cancelled(spaces: list[_Space]) -> list[tuple[_Space, Path, Path | None]]:
    """Cancelled jobs' folders on disk, with their repository when it is one."""
    found: list[tuple[_Space, Path, Path | None]] = []
    for space in spaces:
        folder = Path(space.path).parent
        if space.state == "withdrawn" and folder.exists():
            repo = Path(space.repo) if space.repo else folder / "repo.git"
            found.append((space, folder, repo if (repo / "HEAD").exists() else None))
    return found


def _mirrors(home: Path, spaces: list[_Space], used: set[str], *, gone: set[str]) -> list[Removal]:
    """Mirrors no live job uses, after the job repositories that borrow their objects."""
    found: list[Removal] = []
    for mirror in _mirrors_on_disk(home):
        if _real(mirror) in used:
            continue
        for space in spaces:
            folder = Path(space.path).parent
            if _real(Path(space.mirror)) == _real(mirror) and folder.exists():
                if str(folder) not in gone:
                    found.append(Removal("job repository", str(folder), space.job_id))
        found.append(Removal("mirror", str(mirror)))
    return found


async def clean(office: Office, removals: list[Removal]) -> list[Removal]:
    """Remove what `plan_clean` listed (as far as it is still there); what was removed."""
    removed: list[Removal] = []
    closed: set[int] = set()
    for removal in removals:
        if removal.kind == "worktree" and removal.job_id not in closed:
            assert removal.job_id is not None
            space = await office.workspace.job(removal.job_id)
            if space is not None:
                await office.workspace.close_job(space)
            closed.add(removal.job_id)
        elif removal.kind == "job repository":
            await asyncio.to_thread(shutil.rmtree, removal.path, True)
        elif removal.kind == "mirror":
            await asyncio.to_thread(shutil.rmtree, Path(removal.path).parent, True)
        removed.append(removal)
    return removed


async def _branches(space: _Space, repo: Path | None) -> list[Removal]:
    """A cancelled job's `teaparty/job-*` branches (its own and its tasks')."""
    if repo is None:
        return []
    _, refs = await git(
        repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/teaparty/job-*"
    )
    return [Removal("branch", str(repo), space.job_id, name) for name in refs.split()]


async def _sources(office: Office) -> list[str]:
    """The repositories (mirror names) active jobs come from, workspace made or not."""
    return await office.engine.store.read(_active_sources)


def _active_sources(tx: Tx) -> list[str]:
    kept = (sources.of_job(tx, job.job_id) for job in job_rows.active_projects(tx))
    return [source.repo for source in kept if source is not None]


def _spaces(tx: Tx) -> tuple[list[_Space], set[str]]:
    spaces = [
        _Space(space.job_id, job.state, space.mirror, space.repo, space.path, space.removed)
        for space in workspaces.recorded(tx)
        if (job := job_rows.get(tx, space.job_id)) is not None
    ]
    return spaces, {_real(Path(s.mirror)) for s in spaces if s.state == "active"}


def _mirrors_on_disk(home: Path) -> list[Path]:
    """Every mirror under `home`: `repos/{name}/mirror.git`, a name of one or two parts.

    Looked for at those depths only, never below (where job worktrees are, whose files
    agents write: a `mirror.git` there is not one), and never through a symbolic link.
    """
    found = [*home.glob("repos/*/mirror.git"), *home.glob("repos/*/*/mirror.git")]
    return sorted(
        path
        for path in found
        if (path / "HEAD").is_file() and not any(p.is_symlink() for p in (path, path.parent))
    )


def _real(path: Path) -> str:
    return os.path.realpath(path)
