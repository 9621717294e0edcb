"""Where jobs work on disk: a mirror per repository, and per job its own repository,
worktree and task slots.

    {home}/repos/{name}/mirror.git                      origin's branches; the engine's only
    {home}/repos/{name}/jobs/job-{id}--{slug}/repo.git  the job's branches (objects: the mirror's)
    {home}/repos/{name}/jobs/job-{id}--{slug}/worktree  the job branch, synced at merges
    {home}/repos/{name}/jobs/job-{id}--{slug}/slots/slot-{n}   task worktrees, one task at a time

Agents can read their job's repository and the mirror's objects (its content is origin's),
and write nothing but their task's worktree (docs/architecture.md, "The engine's git"):
the mirror's configuration, refs and hooks, other jobs and other repositories are out of
their reach, and the engine makes the commits. Task worktrees are recycled within a job:
switching a used worktree to a new branch touches only the files that differ, where a
full checkout costs seconds on this machine's disk (bench/teams.py). A slot is leased to
one task in the store; the task's branch stays checked out there until the task ends, so
a restarted engine finds the worker's uncommitted files where it left them. On another
machine (a runner's next run) none of this is there: workspace/rebuild.py lays it out again
from the job's source and what workspace/preserve.py kept there.
"""

from __future__ import annotations

import asyncio
import logging
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from orchestrator.sandbox.identities import Identities
from orchestrator.store.sqlite import Store
from orchestrator.workspace import engine_files, marks, owners, spaces, suggestions
from orchestrator.workspace.git import (
    IDENTITY,
    NETWORK_TIMEOUT_S,
    Checkout,
    Committed,
    GitError,
    Merge,
    add_worktree,
    auth_env,
    commit_all,
    ensure_branch,
    git,
    merge,
    refuse_option,
    remove_worktrees,
    reset_config,
    rev,
)
from orchestrator.workspace.spaces import JobSpace, TaskIds, TaskSpace, task_branch

log = logging.getLogger(__name__)
_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
HUNK_CONTEXT = 3
HUNKS_MAX_CHARS = 6_000
ORIGIN_REFS = ("+refs/heads/*:refs/remotes/origin/*", "+HEAD:refs/remotes/origin/HEAD")
WORK_MESSAGE = "Work on the task"  # a task commit whose worker gave no message


class Workspace:
    """Mirrors, job repositories, job worktrees and task slots under one state directory.

    `tasks` is the task board, whose tasks the slots are leased to. `owner` is the (uid,
    gid) agents' processes run as when that is not the engine's own
    (the engine runs as root); with `uids`, each worktree has a user of its own instead
    (sandbox/identities.py). A worker's slot is handed to its user after the engine writes.
    """

    def __init__(
        self,
        home: Path,
        store: Store,
        *,
        tasks: TaskIds,
        owner: tuple[int, int] | None = None,
        uids: Identities | None = None,
    ) -> None:
        self.home = home
        self.store = store
        self.tasks = tasks
        self.owner = owner
        self.uids = uids if owner is not None else None
        # Per repository: git's worktree bookkeeping is not safe under concurrent add, and
        # two merges into one job branch must not race on its ref.
        self._locks: dict[Path, asyncio.Lock] = {}
        # The worktrees whose files this process gave, whole, to the user (uid, gid) named,
        # and has handed over everything it wrote there since (see `lease`).
        self._handed: dict[Path, tuple[int, int]] = {}
        # The job worktrees whose files this process brought to their branch since it last
        # moved; the others are brought there when an agent next reads them (`current`).
        self._current: set[Path] = set()

    def _lock(self, repo: Path) -> asyncio.Lock:
        return self._locks.setdefault(repo, asyncio.Lock())

    def repo_dir(self, name: str) -> Path:
        """The directory of one repository's mirror and jobs."""
        return self.home / "repos" / name

    async def mirror(self, name: str, source: str, *, auth: str | None = None) -> Path:
        """The mirror of `source` (a URL or path): origin's branches under refs/remotes/origin.

        `auth` is an HTTP header git sends to `source` alone. The URL is passed on each
        fetch, never kept in configuration, and job branches never live here.
        """
        path = await self.bare_mirror(name)
        await git(
            path,
            *("fetch", "--quiet", "--prune", "--no-tags", refuse_option(source, "source")),
            *ORIGIN_REFS,
            env=auth_env(source, auth),
            timeout_s=NETWORK_TIMEOUT_S,
        )
        return path

    async def bare_mirror(self, name: str) -> Path:
        """The mirror of repository `name` as it is, made empty (nothing fetched) if missing;
        its configuration the engine's."""
        path = self.repo_dir(name) / "mirror.git"
        if not (path / "HEAD").exists():
            partial = path.with_name("mirror.git.partial")
            shutil.rmtree(partial, ignore_errors=True)
            partial.parent.mkdir(parents=True, exist_ok=True)
            await git(None, "init", "--quiet", "--bare", "--template=", str(partial))
            partial.rename(path)  # a crash before this leaves only a .partial to redo
        reset_config(path)
        return path

    async def open_job(
        self, job_id: int, *, mirror: Path, branch: str, start: str, slug: str, mark: str
    ) -> JobSpace:
        """The job's repository, branch (made at `start` when new) and worktree; idempotent.

        `branch` is the name the job wants; when the source has a branch of that name that is
        not the job's (no commit of it carries `mark`), the job takes the next free name
        (`branch-2`, ...) and never moves the other. The JobSpace names the one it took.
        """
        stored = await self.job(job_id)
        if stored is not None:  # resumed (or reopened after it ended): the worktree is back
            return await self.reopen(stored)
        start_commit = await rev(mirror, start)
        if start_commit is None:
            raise GitError(f"cannot start job {job_id}: {start!r} names no commit in {mirror}")
        branch, first = await marks.free_branch(job_id, mirror, branch, start_commit, mark)
        folder = mirror.parent / "jobs" / f"job-{job_id}--{slug}"
        repo = await job_repo(folder, mirror)
        await ensure_branch(repo, branch, first)
        _, base = await git(repo, "merge-base", branch, start_commit)
        space = JobSpace(job_id, repo, mirror, branch, base.strip(), folder / "worktree", mark)
        async with self._lock(repo):
            await add_worktree(repo, space.path, f"refs/heads/{branch}")
        holder = await self.store.write(lambda tx: spaces.record_job(tx, space))
        if holder is not None:
            raise GitError(
                f"cannot start job {job_id}: its branch {branch!r} belongs to job {holder} "
                f"of the same repository"
            )
        return space

    def present(self, space: JobSpace) -> bool:
        """Whether the job's repository and the mirror it borrows from are on this machine
        (a runner's next run starts on a fresh one: workspace/rebuild.py makes them again)."""
        return (space.repo / "HEAD").is_file() and (space.mirror / "HEAD").is_file()

    async def has_commits(self, space: JobSpace) -> bool:
        """Whether the job branch moved past the commit the job started from."""
        head = await rev(space.repo, f"refs/heads/{space.branch}")
        return head is not None and head != space.base

    async def reopen(self, space: JobSpace) -> JobSpace:
        """Bring back the worktree of a recorded job (after a restart or a close)."""
        async with self._lock(space.repo):
            await add_worktree(space.repo, space.path, f"refs/heads/{space.branch}")
            await space.checkout.git("reset", "--quiet", "--hard", f"refs/heads/{space.branch}")
        await self.store.write(lambda tx: spaces.reopened(tx, space.job_id))
        return space

    async def job(self, job_id: int) -> JobSpace | None:
        """The job's workspace as recorded, or None before open_job."""
        found = await self.store.read(lambda tx: spaces.job_space(tx, job_id))
        if found is None:
            return None
        space, own = found
        if own:
            return space
        return await self._upgrade(job_id, space.mirror, space.branch, space.base, space.path)

    async def _upgrade(
        self, job_id: int, mirror: Path, branch: str, base: str, path: Path
    ) -> JobSpace:
        """Move a job whose branches lived in the shared mirror into a repository of its own.

        Its task slots were the mirror's: they are given back and its tasks start afresh.
        """
        repo = await job_repo(path.parent, mirror)
        _, refs = await git(
            mirror, "for-each-ref", "--format=%(objectname) %(refname)", f"refs/heads/{branch}*"
        )
        for line in refs.splitlines():
            commit, name = line.split(" ", 1)
            await git(repo, "update-ref", name, commit)
        shutil.rmtree(path, ignore_errors=True)
        await git(mirror, "worktree", "prune")
        await self.store.write(lambda tx: spaces.upgraded(tx, self.tasks, job_id, repo))
        return await self.reopen(JobSpace(job_id, repo, mirror, branch, base, path))

    async def lease(self, job: JobSpace, number: int) -> TaskSpace:
        """A slot with task `number`'s branch checked out (from the job branch when new).

        A slot already leased to the task is returned as it is, uncommitted work included.
        """
        branch = task_branch(job, number)
        slots = job.path.parent / "slots"
        path = Path(
            await self.store.write(lambda tx: spaces.lease(tx, self.tasks, job, number, slots))
        )
        space = TaskSpace(job, number, branch, path)
        checkout = space.checkout
        reset_config(job.repo)
        owner = self.owner_of(path)
        # Whether the slot's files were all its user's: then only what git writes now is handed
        # over. Forgotten first, so a lease that fails half-way hands the whole slot over next.
        known = owner is not None and self._handed.pop(path, None) == owner
        if not checkout.exists():
            known = False
            async with self._lock(job.repo):
                await add_worktree(job.repo, path, f"refs/heads/{job.branch}")
        written: list[str] | None = [".git"] if checkout.restore_gitfile() else []
        if written:  # whoever next runs git there runs the real one
            log.warning("job %d: the .git of %s was not git's; restored", job.job_id, path)
        if await checkout.branch() != branch:
            switched = await self._switch(job, checkout, branch, tell=known)
            written = None if switched is None or written is None else [*written, *switched]
        await self._hand_over(path, owner, written if known else None)
        return space

    async def _switch(
        self, job: JobSpace, checkout: Checkout, branch: str, *, tell: bool
    ) -> list[str] | None:
        """Check task branch `branch` out in a slot (made from the job branch when new),
        discarding what is there; with `tell`, the paths git wrote (None: not known)."""
        if (checkout.admin / "MERGE_HEAD").exists():  # a resolution left unfinished
            await checkout.git("merge", "--abort")
            tell = False
        target = await rev(job.repo, f"refs/heads/{branch}")
        # A new branch starts from the commit, not the branch name: `checkout -b` reads the
        # name twice (for the files, then for the new branch), so a merge between the two
        # reads would leave the task's files a commit behind its branch, and its commit
        # reverting it.
        start = None if target else await rev(job.repo, f"refs/heads/{job.branch}")
        written: list[str] | None = None
        if tell and (commit := target or start) is not None:
            # what checkout -f writes: the tracked files that differ from HEAD, and the files
            # that differ between HEAD and the branch's commit
            restored, switched = await asyncio.gather(
                owners.differing(checkout), owners.between(checkout, "HEAD", commit)
            )
            written = [*restored, *switched]
        await checkout.git("clean", "-q", "-ffdx")  # checkout -f below discards tracked changes
        if target is None:
            await checkout.git("checkout", "--quiet", "-f", "-b", branch, start or job.branch)
        else:
            await checkout.git("checkout", "--quiet", "-f", branch)
        return written

    def owner_of(self, path: Path) -> tuple[int, int] | None:
        """The uid and gid agents' processes in the worktree at `path` run as (None: the
        engine's own)."""
        return self.owner if self.uids is None else self.uids.of(path)

    def wrote(self, path: Path) -> None:
        """The engine wrote in the worktree at `path` (what, it does not say): the next
        hand-over there gives its user the whole tree."""
        self._handed.pop(path, None)

    async def hand_over(self, path: Path) -> None:
        """Give a worktree's files to its agents' user after the engine wrote them (all of
        them: what it wrote is not known here)."""
        self.wrote(path)
        await self._hand_over(path, self.owner_of(path), None)

    async def ensure_handed(self, path: Path) -> None:
        """Give a worktree's files to its agents' user unless this process already did (and
        has handed over everything it wrote there since)."""
        owner = self.owner_of(path)
        if owner is not None and self._handed.get(path) != owner:
            await self._hand_over(path, owner, None)

    async def _hand_over(
        self, path: Path, owner: tuple[int, int] | None, written: list[str] | None
    ) -> None:
        """Give `owner` the paths the engine `written` in the worktree at `path` (None: the
        whole tree), and remember that its files are all `owner`'s."""
        if owner is None:
            return
        if written is None:
            await asyncio.to_thread(owners.chown_tree, path, owner)
        elif written:
            await asyncio.to_thread(owners.chown_paths, path, written, owner)
        self._handed[path] = owner

    async def task(self, job: JobSpace, number: int) -> TaskSpace | None:
        """Task `number`'s slot while it is leased, else None."""
        row = await self.store.read(lambda tx: spaces.slot_of(tx, self.tasks, job.job_id, number))
        return None if row is None else TaskSpace(job, number, task_branch(job, number), Path(row))

    async def commit_task(
        self, space: TaskSpace, message: str, *, author: tuple[str, str]
    ) -> Committed:
        """Commit what the worker left in the task's worktree, on the task's branch."""
        reset_config(space.job.repo)
        committed = await commit_all(
            space.checkout,
            marks.marked(message or WORK_MESSAGE, space.job.mark),
            author=author,
            committer=IDENTITY,
        )
        if committed.stripped:
            await self.hand_over(space.path)
        return committed

    async def release(self, job: JobSpace, number: int) -> None:
        """Give the task's slot back; its branch stays, its checkout waits for the next task."""
        path = await self.store.read(lambda tx: spaces.slot_of(tx, self.tasks, job.job_id, number))
        if path is None:
            return
        checkout = Checkout(job.repo, Path(path))
        if checkout.exists():  # detach without re-reading every file
            _, head = await git(checkout.admin, "rev-parse", "HEAD")
            await git(checkout.admin, "update-ref", "--no-deref", "HEAD", head.strip())
        await self.store.write(lambda tx: spaces.freed(tx, path))

    async def merge_task(self, job: JobSpace, number: int, title: str) -> Merge:
        """Merge the task's branch into the job branch (--no-ff, no checkout), then sync."""
        async with self._lock(job.repo):
            reset_config(job.repo)
            merged = await merge(
                job.repo,
                into=job.branch,
                source=f"refs/heads/{task_branch(job, number)}",
                message=marks.marked(f"Merge task #{number}: {title}", job.mark),
                identity=IDENTITY,
            )
            if merged.commit is not None:
                # The job worktree is brought to the branch when the lead next reads it (one
                # checkout for the merges of a whole round, and none for the last).
                self._current.discard(job.path)
        return merged

    async def sync(self, job: JobSpace) -> None:
        """Bring the job worktree's files to the job branch after the engine moved it."""
        self._current.discard(job.path)
        if job.checkout.exists():
            await job.checkout.git("reset", "--quiet", "--hard", f"refs/heads/{job.branch}")
            self._current.add(job.path)

    async def current(self, job: JobSpace) -> None:
        """Bring the job worktree's files to the job branch unless this process already did
        since the branch last moved (after a restart, it does once)."""
        if job.path not in self._current:
            async with self._lock(job.repo):
                await self.sync(job)

    async def catch_up(self, job: JobSpace, *, message: str) -> Merge | None:
        """Take into the job branch what people pushed to it on the source (its mirror
        fetched just before): a fast-forward when the job has nothing newer, else a merge.

        None when the source has no such branch or nothing the job lacks; a Merge with
        `conflicts` (and the branch unmoved) when the two cannot be merged.
        """
        theirs = await rev(job.mirror, f"refs/remotes/origin/{job.branch}")
        if theirs is None:
            return None
        async with self._lock(job.repo):
            ours = await rev(job.repo, f"refs/heads/{job.branch}")
            if ours is None or theirs == ours:
                return None
            code, _ = await git(job.repo, "merge-base", "--is-ancestor", theirs, ours, check=False)
            if code == 0:
                return None
            code, _ = await git(job.repo, "merge-base", "--is-ancestor", ours, theirs, check=False)
            if code == 0:
                await git(job.repo, "update-ref", f"refs/heads/{job.branch}", theirs, ours)
                merged = Merge(theirs)
            else:
                reset_config(job.repo)
                merged = await merge(
                    job.repo,
                    into=job.branch,
                    source=theirs,
                    message=marks.marked(message, job.mark),
                    identity=IDENTITY,
                )
            if merged.commit is not None:
                await self.sync(job)
        return merged

    async def apply_suggestion(
        self, job: JobSpace, *, path: str, line: int, seen: str, replacement: str, message: str
    ) -> str:
        """Apply a reviewer's suggestion to the job branch (workspace/suggestions.py); the
        commit. GitError says why it cannot be applied."""
        async with self._lock(job.repo):
            reset_config(job.repo)
            commit = await suggestions.apply(
                job.repo,
                job.branch,
                path=path,
                line=line,
                seen=seen,
                replacement=replacement,
                message=marks.marked(message, job.mark),
                scratch=job.path.parent / "suggestion.tmp",
            )
            await self.sync(job)
        return commit

    async def commit_engine_files(
        self, job: JobSpace, blobs: Mapping[str, str | None], *, head: str, message: str
    ) -> str:
        """Commit files the engine wrote (each path's blob; None: removed) on the job branch
        at `head` (GitError when it moved), then bring the job worktree to it; the commit."""
        async with self._lock(job.repo):
            reset_config(job.repo)
            commit = await engine_files.commit_blobs(
                job.repo,
                job.branch,
                head,
                blobs,
                message=marks.marked(message, job.mark),
                scratch=job.path.parent / "engine-files.tmp",
            )
            await self.sync(job)
        return commit

    async def conflict_hunks(self, job: JobSpace, merged: Merge) -> str:
        """The conflicting regions of each file, from the tree git merge-tree wrote."""
        if merged.tree is None:
            return ""
        parts: list[str] = []
        for name in merged.conflicts:
            code, text = await git(job.repo, "cat-file", "-p", f"{merged.tree}:{name}", check=False)
            hunks = _marker_regions(text) if code == 0 else "(not a text file)"
            parts.append(f"--- {name}\n{hunks}")
        joined = "\n".join(parts)
        if len(joined) > HUNKS_MAX_CHARS:
            joined = joined[:HUNKS_MAX_CHARS] + "\n… (more conflicts; see the files)"
        return joined

    async def publish(
        self, job: JobSpace, remote: str, *, auth: str | None = None, commit: str | None = None
    ) -> None:
        """Push the job branch to `remote` (a URL or path) under the same name: exactly
        `commit` when given (what was approved), else the branch as it is.

        `auth` is an HTTP header git sends to `remote` alone (never in an argument).
        """
        ref = f"refs/heads/{job.branch}"
        if commit is not None and not _COMMIT.fullmatch(commit):
            raise GitError(f"{commit!r} is not a commit id")
        reset_config(job.repo)
        await git(
            job.repo,
            *("push", "--quiet", refuse_option(remote, "remote"), f"{commit or ref}:{ref}"),
            env=auth_env(remote, auth),
            timeout_s=NETWORK_TIMEOUT_S,
        )

    async def close_job(self, job: JobSpace) -> None:
        """Remove the job's worktree and task slots; its repository and branches stay."""
        async with self._lock(job.repo):
            slots = sorted((job.path.parent / "slots").glob("slot-*"))
            await remove_worktrees(job.repo, [job.path, *slots])
        for path in [job.path, *slots]:
            self._handed.pop(path, None)
            self._current.discard(path)
            if self.uids is not None:
                self.uids.forget(path)
        await self.store.write(lambda tx: spaces.closed(tx, job))

    async def recover(self) -> list[str]:
        """Clean up after a crash: slots of tasks no mini-team works on, worktrees of done jobs.

        A cancelled job's worktrees stay, to be looked at, until `teaparty jobs clean`.

        Returns what it cleaned, one line each.
        """
        cleaned: list[str] = []
        slots, ended, legacy = await self.store.read(lambda tx: spaces.orphans(tx, self.tasks))
        for job_id, number in slots:
            job = await self.job(job_id)
            if job is not None:
                await self.release(job, number)
                cleaned.append(f"released the slot of job {job_id} task #{number}")
        for job_id in ended:
            job = await self.job(job_id)
            if job is not None:
                await self.close_job(job)
                cleaned.append(f"removed the worktrees of done job {job_id}")
        for mirror in legacy:  # the shared slots of an earlier layout
            await self._forget_legacy_slots(mirror)
            cleaned.append(f"removed the shared task slots of {mirror}")
        return cleaned

    async def _forget_legacy_slots(self, mirror: str) -> None:
        await remove_worktrees(Path(mirror), [Path(mirror).parent / "slots"])
        await self.store.write(lambda tx: spaces.forget_slots(tx, mirror))


async def job_repo(folder: Path, mirror: Path) -> Path:
    """The job's own repository, borrowing the mirror's objects; made once."""
    repo = folder / "repo.git"
    if (repo / "HEAD").exists():
        return repo
    partial = folder / "repo.git.partial"
    await asyncio.to_thread(_fresh, partial)
    await git(None, "init", "--quiet", "--bare", "--template=", str(partial))
    await asyncio.to_thread(_borrow_objects, partial, mirror)
    reset_config(partial)
    partial.rename(repo)
    return repo


def _fresh(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)


def _borrow_objects(repo: Path, mirror: Path) -> None:
    info = repo / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "alternates").write_text(f"{mirror / 'objects'}\n")


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
