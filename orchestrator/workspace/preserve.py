"""A job's unpublished work kept on its remote, on refs of the engine's own, between machines.

A runner's next workflow run starts on a fresh machine: the job's repository, with the
merges in its job branch and the commits on its task branches, is gone, though the store
says the job has them. `preserve` pushes them where the next run finds them:

    refs/teaparty/work/{job_id}/job         the job branch
    refs/teaparty/work/{job_id}/task-{n}    task n's branch

Outside `refs/heads`, so no push workflow, branch rule or CI fires on them and no branch
list shows them. Pushed without force: the engine never rewrites a job or task branch (a
task branch is made once from the job branch and only gains commits; merges are --no-ff,
a catch-up is a fast-forward or a merge), so a refused push means another run moved the
refs first, and overwriting them would lose that run's work: `PreservedRaceError`, for the
edge to treat as a lost race. `--atomic`: the job and its tasks move together, or none.

`fetch` brings them into a job's own repository (never the mirror, whose content is
origin's branches only); `listed` and `delete` serve forgetting them once the job ends,
each deletion leased on the commit just listed, so a ref another run moved meanwhile stays.

Git runs as everywhere in the engine (workspace/git.py): the remote named by the engine and
refused when it would read as an option, the configuration rewritten before a push, the
`auth` header in the environment of the one command that talks to the remote, never in an
argument, a configuration file or the store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.workspace.git import (
    NETWORK_TIMEOUT_S,
    GitError,
    auth_env,
    git,
    refuse_option,
    reset_config,
)
from orchestrator.workspace.layout import JobSpace

WORK_REFS = "refs/teaparty/work"
_TASK = re.compile(r"task-([1-9][0-9]*)")


def work_prefix(job_id: int) -> str:
    """Where job `job_id`'s preserved refs live, with a trailing slash."""
    return f"{WORK_REFS}/{job_id}/"


class PreservedRaceError(GitError):
    """The remote's preserved refs of a job are not behind this run's branches: another run
    preserved newer work (nothing was overwritten)."""

    def __init__(self, job_id: int, remote: str, said: str) -> None:
        super().__init__(
            f"job {job_id}'s work on {remote} moved since this run read it (another run "
            f"preserved newer work); nothing was overwritten: {said}"
        )
        self.job_id = job_id
        self.remote = remote


@dataclass(frozen=True)
class Preserved:
    """What `preserve` pushed: the job branch's commit and each task branch's, by number."""

    job_id: int
    job: str
    tasks: tuple[tuple[int, str], ...] = ()

    @property
    def refs(self) -> dict[str, str]:
        """The refs on the remote and the commit each now names."""
        prefix = work_prefix(self.job_id)
        found = {f"{prefix}job": self.job}
        found.update({f"{prefix}task-{number}": commit for number, commit in self.tasks})
        return found


async def preserve(space: JobSpace, remote: str, *, auth: str | None = None) -> Preserved:
    """Push the job branch and its task branches to the job's refs on `remote` (a URL or a
    path), fast-forward only, all or none. PreservedRaceError when the remote's are not
    behind; GitError for any other failure."""
    _, listing = await git(
        space.repo,
        *("for-each-ref", "--format=%(objectname) %(refname)"),
        *(f"refs/heads/{space.branch}", f"refs/heads/{space.branch}--task-*"),
    )
    job, tasks = _branches(space, listing)
    if job is None:
        raise GitError(f"job {space.job_id} has no branch {space.branch!r} to preserve")
    found = Preserved(space.job_id, job, tasks)
    reset_config(space.repo)
    try:
        await git(
            space.repo,
            *("push", "--quiet", "--atomic", refuse_option(remote, "remote")),
            *(f"{commit}:{ref}" for ref, commit in found.refs.items()),
            env=auth_env(remote, auth),
            timeout_s=NETWORK_TIMEOUT_S,
        )
    except GitError as exc:
        if "[rejected]" in str(exc):  # not a fast-forward; "[remote rejected]" is the server's
            raise PreservedRaceError(space.job_id, remote, str(exc)) from exc
        raise
    return found


def _branches(space: JobSpace, listing: str) -> tuple[str | None, tuple[tuple[int, str], ...]]:
    """The job branch's commit and the task branches' (number, commit), from for-each-ref."""
    job: str | None = None
    tasks: list[tuple[int, str]] = []
    task_prefix = f"refs/heads/{space.branch}--"
    for line in listing.splitlines():
        commit, ref = line.split(" ", 1)
        if ref == f"refs/heads/{space.branch}":
            job = commit
        elif (number := _TASK.fullmatch(ref.removeprefix(task_prefix))) is not None:
            tasks.append((int(number.group(1)), commit))
    return job, tuple(sorted(tasks))


async def listed(
    remote: str, *, auth: str | None = None, job_id: int | None = None
) -> dict[int, dict[str, str]]:
    """The preserved refs on `remote` (of one job, if given), by job: ref → commit."""
    pattern = work_prefix(job_id) if job_id is not None else f"{WORK_REFS}/"
    _, out = await git(
        None,
        *("ls-remote", "--refs", refuse_option(remote, "remote"), f"{pattern}*"),
        env=auth_env(remote, auth),
        timeout_s=NETWORK_TIMEOUT_S,
    )
    found: dict[int, dict[str, str]] = {}
    for line in out.splitlines():
        commit, ref = line.split("\t", 1)
        owner = ref.removeprefix(f"{WORK_REFS}/").split("/", 1)[0]
        if ref.startswith(pattern) and owner.isdigit():  # ls-remote matches refs' tails too
            found.setdefault(int(owner), {})[ref] = commit
    return found


async def delete(
    git_dir: Path, remote: str, refs: Mapping[str, str], *, auth: str | None = None
) -> tuple[str, ...]:
    """Delete `refs` (ref → the commit it was listed at) on `remote`, each only while it
    still names that commit, all or none; the refs deleted. Any repository serves as
    `git_dir`: a deletion sends no objects."""
    if not refs:
        return ()
    reset_config(git_dir)
    await git(
        git_dir,
        *("push", "--quiet", "--atomic"),
        *(f"--force-with-lease={ref}:{commit}" for ref, commit in sorted(refs.items())),
        refuse_option(remote, "remote"),
        *(f":{ref}" for ref in sorted(refs)),
        env=auth_env(remote, auth),
        timeout_s=NETWORK_TIMEOUT_S,
    )
    return tuple(sorted(refs))


async def fetch(
    repo: Path, source: str, job_id: int, *, auth: str | None = None
) -> tuple[str | None, dict[int, str]]:
    """Fetch the job's preserved refs from `source` into its repository `repo`; the job
    branch's commit (None when none was preserved) and each task branch's, by number. The
    fetched refs are removed again: the branches made from them are what the engine uses."""
    prefix = work_prefix(job_id)
    reset_config(repo)
    await git(
        repo,
        *("fetch", "--quiet", "--no-tags", "--no-write-fetch-head"),
        refuse_option(source, "source"),
        f"+{prefix}*:{prefix}*",
        env=auth_env(source, auth),
        timeout_s=NETWORK_TIMEOUT_S,
    )
    _, out = await git(repo, "for-each-ref", "--format=%(objectname) %(refname)", prefix)
    job: str | None = None
    tasks: dict[int, str] = {}
    for line in out.splitlines():
        commit, ref = line.split(" ", 1)
        name = ref.removeprefix(prefix)
        if name == "job":
            job = commit
        elif (number := _TASK.fullmatch(name)) is not None:
            tasks[int(number.group(1))] = commit
        await git(repo, "update-ref", "-d", ref)
    return job, tasks
