"""A job's unpublished work kept on its remote, on refs of the engine's own, between machines.

A runner's next workflow run starts on a fresh machine: the job's repository, with the
merges in its job branch and the commits on its task branches, is gone, though the store
says the job has them. `preserve` pushes them where the next run finds them:

    refs/teaparty/work/{job_id}/job         the job branch
    refs/teaparty/work/{job_id}/task-{n}    task n's branch
    refs/teaparty/work/{job_id}/wip-{n}     what task n's slot holds uncommitted

A run ends while a worker is mid-task (a question it waits on, the time limit), its edits
not yet committed: `uncommitted` makes them a commit (through a scratch index: the slot's
own index and files are untouched) whose first parent is the slot's commit and, while a
merge is in progress there, whose second is the commit being merged. `restore` puts its
files back in the next machine's slot, uncommitted again, only when the slot holds that
same first parent (a stale snapshot is ignored, and said).

Outside `refs/heads`, so no push workflow, branch rule or CI fires on them and no branch
list shows them. Pushed without force: the engine never rewrites a job or task branch (a
task branch is made once from the job branch and only gains commits; merges are --no-ff,
a catch-up is a fast-forward or a merge), so a refused push means another run moved the
refs first, and overwriting them would lose that run's work: `PreservedRaceError`, for the
edge to treat as a lost race. A snapshot replaces the last one (it is no fast-forward), so
it is pushed with a lease on the value this machine last saw there (kept in the job's
repository under refs/teaparty/preserved/), and deleted, leased too, once its slot is
clean. `--atomic`: the job, its tasks and their snapshots move together, or none.

`fetch` brings them into a job's own repository (never the mirror, whose content is
origin's branches only); `listed` and `delete` serve forgetting them once the job ends,
each deletion leased on the commit just listed, so a ref another run moved meanwhile stays.

Git runs as everywhere in the engine (workspace/git.py): the remote named by the engine and
refused when it would read as an option, the configuration rewritten before a push, the
`auth` header in the environment of the one command that talks to the remote, never in an
argument, a configuration file or the store.
"""

from __future__ import annotations

import logging
import re
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from orchestrator.workspace.git import (
    NETWORK_TIMEOUT_S,
    Checkout,
    GitError,
    auth_env,
    contended,
    git,
    refuse_option,
    reset_config,
    rev,
    strip_nested_repositories,
)
from orchestrator.workspace.spaces import JobSpace

log = logging.getLogger(__name__)
WORK_REFS = "refs/teaparty/work"
SEEN = "refs/teaparty/preserved/"  # in a job's repository: the snapshots its remote has
_TASK = re.compile(r"task-([1-9][0-9]*)")
_WIP = re.compile(r"wip-([1-9][0-9]*)")
_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_SNAPSHOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "TeaParty",
    "GIT_AUTHOR_EMAIL": "teaparty@localhost",
    "GIT_COMMITTER_NAME": "TeaParty",
    "GIT_COMMITTER_EMAIL": "teaparty@localhost",
}


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
    """What `preserve` pushed: the job branch's commit and each task branch's, by number,
    and the snapshot of each slot that held uncommitted work."""

    job_id: int
    job: str
    tasks: tuple[tuple[int, str], ...] = ()
    snapshots: tuple[tuple[int, str], ...] = ()

    @property
    def refs(self) -> dict[str, str]:
        """The refs on the remote and the commit each now names."""
        prefix = work_prefix(self.job_id)
        found = {f"{prefix}job": self.job}
        found.update({f"{prefix}task-{number}": commit for number, commit in self.tasks})
        return found


async def preserve(
    space: JobSpace,
    remote: str,
    *,
    auth: str | None = None,
    slots: Sequence[tuple[int, Checkout]] = (),
) -> Preserved:
    """Push the job branch and its task branches to the job's refs on `remote` (a URL or a
    path), fast-forward only, with a snapshot of what each of `slots` (task number, its
    slot) holds uncommitted; all or none. PreservedRaceError when the remote's are not
    behind (or its snapshots not as this machine last saw them); GitError otherwise."""
    _, listing = await git(
        space.repo,
        *("for-each-ref", "--format=%(objectname) %(refname)"),
        *(f"refs/heads/{space.branch}", f"refs/heads/{space.branch}--task-*"),
    )
    job, tasks = _branches(space, listing)
    if job is None:
        raise GitError(f"job {space.job_id} has no branch {space.branch!r} to preserve")
    snapshots = await _snapshots(slots)
    seen = await _seen(space.repo)
    found = Preserved(space.job_id, job, tasks, tuple(sorted(snapshots.items())))
    prefix = work_prefix(space.job_id)
    leases = [f"--force-with-lease={prefix}wip-{n}:{seen.get(n, '')}" for n in snapshots]
    gone = sorted(set(seen) - set(snapshots))  # clean now, or no longer leased
    leases += [f"--force-with-lease={prefix}wip-{n}:{seen[n]}" for n in gone]
    reset_config(space.repo)
    try:
        await git(
            space.repo,
            *("push", "--quiet", "--atomic", *leases, refuse_option(remote, "remote")),
            *(f"{commit}:{ref}" for ref, commit in found.refs.items()),
            *(f"{commit}:{prefix}wip-{n}" for n, commit in sorted(snapshots.items())),
            *(f":{prefix}wip-{n}" for n in gone),
            env=auth_env(remote, auth),
            timeout_s=NETWORK_TIMEOUT_S,
        )
    except GitError as exc:
        # not a fast-forward, a lease that no longer holds, or another run's push under way
        if "[rejected]" in str(exc) or contended(str(exc)):
            raise PreservedRaceError(space.job_id, remote, str(exc)) from exc
        raise
    for n, commit in snapshots.items():
        await git(space.repo, "update-ref", f"{SEEN}wip-{n}", commit)
    for n in gone:
        await git(space.repo, "update-ref", "-d", f"{SEEN}wip-{n}")
    return found


async def _snapshots(slots: Sequence[tuple[int, Checkout]]) -> dict[int, str]:
    """Each slot's uncommitted work as a commit, by task number (clean slots left out)."""
    found: dict[int, str] = {}
    with tempfile.TemporaryDirectory(prefix="teaparty-index-") as scratch:
        for number, checkout in slots:
            commit = await uncommitted(checkout, Path(scratch) / f"{number}.index")
            if commit is not None:
                found[number] = commit
    return found


async def uncommitted(checkout: Checkout, index: Path) -> str | None:
    """A commit of what `checkout` holds that its commit does not (ignored files aside), made
    through the scratch `index`: first parent the checkout's commit, second the commit a
    merge in progress merges; None when there is nothing uncommitted. Nested repositories
    are removed first, as the engine's own commits do (git.commit_all)."""
    head = await rev(checkout.admin, "HEAD")
    if head is None:
        return None
    strip_nested_repositories(checkout.path)

    async def scratch(*args: str) -> str:
        env = {"GIT_INDEX_FILE": str(index)}
        return (await git(checkout.admin, *args, work_tree=checkout.path, env=env))[1]

    await scratch("read-tree", head)
    await scratch("add", "-A")
    tree = await scratch("write-tree")
    _, clean = await git(checkout.admin, "rev-parse", f"{head}^{{tree}}")
    merging = _merging(checkout)
    if tree.strip() == clean.strip() and merging is None:
        return None
    parents = ["-p", head, *(["-p", merging] if merging else [])]
    _, commit = await git(
        checkout.admin,
        *("commit-tree", tree.strip(), *parents, "-m", "TeaParty: a slot's uncommitted work"),
        env=_SNAPSHOT_IDENTITY,
    )
    return commit.strip()


async def restore(checkout: Checkout, snapshot: str) -> bool:
    """Put a snapshot's files back in `checkout`, uncommitted (its index at its commit), with
    the merge it was in the middle of, when the checkout holds the snapshot's first parent;
    whether it did."""
    _, line = await git(checkout.admin, "rev-list", "--parents", "-n", "1", snapshot)
    parents = line.split()[1:]
    head = await rev(checkout.admin, "HEAD")
    if not parents or parents[0] != head:
        log.warning(
            "%s: a snapshot of uncommitted work taken on %s is not for this slot's %s; left out",
            checkout.path.name,
            parents[0][:12] if parents else "nothing",
            (head or "nothing")[:12],
        )
        return False
    await checkout.git("read-tree", "--reset", "-u", snapshot)
    await checkout.git("reset", "--quiet")  # the index back at the commit; the files stay
    if len(parents) > 1:
        (checkout.admin / "MERGE_HEAD").write_text(f"{parents[1]}\n")
    return True


def _merging(checkout: Checkout) -> str | None:
    """The commit a merge in progress in `checkout` merges (git keeps it in the engine-only
    admin directory), if one is."""
    try:
        text = (checkout.admin / "MERGE_HEAD").read_text().split()
    except OSError:
        return None
    return text[0] if text and _SHA.fullmatch(text[0]) else None


async def _seen(repo: Path) -> dict[int, str]:
    """The snapshots this machine last saw on the remote, by task number."""
    _, out = await git(repo, "for-each-ref", "--format=%(objectname) %(refname)", SEEN)
    found: dict[int, str] = {}
    for line in out.splitlines():
        commit, ref = line.split(" ", 1)
        if (number := _WIP.fullmatch(ref.removeprefix(SEEN))) is not None:
            found[int(number.group(1))] = commit
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


@dataclass(frozen=True)
class Fetched:
    """A job's preserved refs as fetched: the job branch's commit (None when none was
    preserved), each task branch's, and each slot's snapshot, by task number."""

    job: str | None
    tasks: dict[int, str]
    snapshots: dict[int, str]


async def fetch(repo: Path, source: str, job_id: int, *, auth: str | None = None) -> Fetched:
    """Fetch the job's preserved refs from `source` into its repository `repo`. The fetched
    refs are removed again (the branches made from them are what the engine uses); the
    snapshots are kept as seen (see `preserve`)."""
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
    found = Fetched(None, {}, {})
    for line in out.splitlines():
        commit, ref = line.split(" ", 1)
        name = ref.removeprefix(prefix)
        if name == "job":
            found = Fetched(commit, found.tasks, found.snapshots)
        elif (number := _TASK.fullmatch(name)) is not None:
            found.tasks[int(number.group(1))] = commit
        elif (number := _WIP.fullmatch(name)) is not None:
            found.snapshots[int(number.group(1))] = commit
            await git(repo, "update-ref", f"{SEEN}{name}", commit)
        await git(repo, "update-ref", "-d", ref)
    return found
