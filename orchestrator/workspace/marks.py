"""A job's mark on its commits, and the branch a new job takes.

The engine's commits for a job carry a trailer with the job's mark, a digest of its key:
it names the same job in every state directory, unlike its number. A branch already on
the source is a new job's only when its commits carry that mark (a run whose store was
lost pushed it); anyone else's branch of the name is left alone and the job takes the
next free name.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

from orchestrator.workspace.git import GitError, git, rev

log = logging.getLogger(__name__)
MARK_TRAILER = "TeaParty-Job"
NAMES_TRIED = 50  # free names looked for past a branch that is not the job's
OWN_COMMITS_READ = 200  # of a branch the job may have pushed, read for its mark


def job_mark(key: str) -> str:
    """The mark a job's commits carry: a digest of its key, which names the same job in every
    state directory (an issue's k-th job; a local run's nonce), unlike its number."""
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def marked(message: str, mark: str | None) -> str:
    """`message` with the job's mark as a trailer (unchanged without one)."""
    return message if mark is None else f"{message.rstrip()}\n\n{MARK_TRAILER}: {mark}"


async def free_branch(
    job_id: int, mirror: Path, wanted: str, start: str, mark: str
) -> tuple[str, str]:
    """The branch a new job takes and the commit it starts from.

    A name the source lacks starts at `start`. A branch already there is the job's only when
    its commits carry the job's mark (pushed by a run whose store was lost: a runner killed
    before it saved its state, a store restored from an older backup): the job continues from
    it, so its push is a fast-forward and that run's pull request is the job's; merged into
    `start` already, it is history and the job starts at `start`, a fast-forward of it.
    Anyone else's branch of that name (another state directory's job, a person's) is left
    alone: the job takes the next free name.
    """
    for number in range(1, NAMES_TRIED + 1):
        branch = wanted if number == 1 else f"{wanted}-{number}"
        published = await rev(mirror, f"refs/remotes/origin/{branch}")
        if published is None:
            return branch, start
        if not await carries_mark(mirror, published, start, mark):
            log.warning(
                "job %d: the source has a branch %s (at %s) this job did not make; it takes "
                "another name",
                job_id,
                branch,
                published[:12],
            )
            continue
        code, _ = await git(mirror, "merge-base", "--is-ancestor", published, start, check=False)
        if code == 0:
            return branch, start
        log.warning(
            "job %d: its branch %s is already on the source at %s, made by this job (a run "
            "whose state was lost pushed it?); the job continues from it",
            job_id,
            branch,
            published[:12],
        )
        return branch, published
    raise GitError(f"cannot start job {job_id}: {wanted!r} and {NAMES_TRIED - 1} more are taken")


async def carries_mark(
    git_dir: Path | None, head: str, start: str, mark: str, *, where: tuple[str, ...] = ()
) -> bool:
    """Whether the job with `mark` made the branch at `head` (of `git_dir`, or where git's
    options `where` say): one of its commits that `start` lacks (or its head, when `start`
    has them all) has the job's trailer."""
    trailers = f"--format=%(trailers:key={MARK_TRAILER},valueonly)"
    _, out = await git(
        git_dir, *where, "log", trailers, f"--max-count={OWN_COMMITS_READ}", head, "--not", start
    )
    if not out.strip():
        _, out = await git(git_dir, *where, "log", trailers, "--max-count=1", head)
    return mark in out.split()
