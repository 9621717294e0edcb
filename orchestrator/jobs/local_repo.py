"""A person's own repository as a local run, `teaparty doctor` and `teaparty learnings` use it.

Git runs there the way the person runs it (`user_git`, the engine's hardened git found from
the repository's path). The edge's local run reaches the repository through the named
functions here (by way of orchestrator/api.py), never through git itself: what its project
says, the standing learnings at HEAD, whether the job branch may be pushed there, what a job
left on its branch.
"""

from __future__ import annotations

import getpass
import hashlib
from pathlib import Path

from orchestrator.config import Organisation, Project, load_project
from orchestrator.core.errors import ForgeError
from orchestrator.jobs.features import GATE_KINDS
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.ports import PushTarget
from orchestrator.workspace.git import git, slug
from orchestrator.workspace.instructions import read_instructions
from orchestrator.workspace.marks import carries_mark


async def user_git(repo: Path, *args: str, check: bool = True) -> tuple[int, str]:
    """Git in the user's own repository (found from `repo`, the way they run git there)."""
    return await git(None, "-C", str(repo), *args, check=check)


def local_repository(repo: Path) -> str:
    """The name a local repository's jobs and prepared environments go by: its directory's
    name and a digest of its path (two checkouts of one name are two repositories)."""
    digest = hashlib.sha256(str(repo).encode()).hexdigest()[:8]
    return f"local/{repo.name}-{digest}"


async def read_project(repo: Path, org: Organisation) -> tuple[Project, str]:
    """The repository's project (and the text it came from; the defaults without a file)."""
    code, text = await user_git(repo, "show", "HEAD:.teaparty/project.yaml", check=False)
    if code != 0:
        text = f"humans: {{decider: {getpass.getuser()}}}\n"
    project = load_project(
        text,
        org=org,
        source=".teaparty/project.yaml",
        default_name=slug(repo.name),
        kinds=GATE_KINDS,
    )
    return project, text


async def instructions_line(repo: Path, project: Project) -> str:
    """What `teaparty run` says of the repository's instruction files for agents."""
    _, git_dir = await user_git(repo, "rev-parse", "--absolute-git-dir")
    found = await read_instructions(Path(git_dir.strip()), "HEAD", extra=project.instructions.files)
    wide = ", ".join(i.path for i in found.wide()) or "none"
    scoped = len(found.found) - len(found.wide())
    return f"instructions for agents: {wide}" + (f" (+{scoped} scoped)" if scoped else "")


async def standing_learnings(repo: Path) -> str | None:
    """The repository's `.teaparty/learnings.md` at HEAD (None: it has none)."""
    code, text = await user_git(repo, "show", "HEAD:.teaparty/learnings.md", check=False)
    return text if code == 0 else None


async def head_commit(repo: Path) -> str:
    """The commit at the repository's HEAD, which a new job starts from."""
    _, head = await user_git(repo, "rev-parse", "HEAD")
    return head.strip()


async def branch_commits(repo: Path, branch: str) -> tuple[str, ...] | None:
    """The commits of `branch` not on HEAD, one line each (`%h %an %s`); None when the
    repository has no such branch."""
    code, _ = await user_git(repo, "rev-parse", "--verify", "--quiet", branch, check=False)
    if code != 0:
        return None
    _, log = await user_git(repo, "log", "--format=%h %an %s", branch, "--not", "HEAD")
    return tuple(log.splitlines())


async def checked_out(repo: Path, branch: str) -> Path | None:
    """The worktree of the user's repository `repo` that has `branch` checked out, if any."""
    _, listing = await user_git(repo, "worktree", "list", "--porcelain", "-z")
    where: Path | None = None
    for field in listing.split("\0"):
        if field.startswith("worktree "):
            where = Path(field.removeprefix("worktree "))
        elif field == f"branch refs/heads/{branch}":
            return where
    return None


async def local_push_target(repo: Path, job: JobHandle) -> PushTarget:
    """The local repository `repo` as where the job branch is pushed; ForgeError, saying
    what to do, when a worktree there has the job branch checked out (git would refuse to
    move it under the files) or the branch there is not one this job made."""
    space = job.space
    if (where := await checked_out(repo, space.branch)) is not None:
        raise ForgeError(
            f"branch {space.branch} is checked out in {where}, so it cannot be updated "
            "there; switch that checkout to another branch"
        )
    inside = ("-C", str(repo))
    _, theirs = await git(
        None,
        *inside,
        "rev-parse",
        "--verify",
        "--quiet",
        "--end-of-options",
        f"refs/heads/{space.branch}",
        check=False,
    )
    if (
        theirs.strip()
        and space.mark is not None
        and not await carries_mark(None, theirs.strip(), space.base, space.mark, where=inside)
    ):
        raise ForgeError(
            f"{repo} has a branch {space.branch} this job did not make (made since "
            "the job took the name); rename or delete it there"
        )
    return PushTarget(str(repo))
