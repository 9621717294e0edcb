"""Git for the engine: hardened commands, branches, linked worktrees and checkout-free merges.

Every git command the engine runs goes through `git()`, which never lets a repository an
agent could have written decide what runs (see docs/architecture.md, "The engine's git"):
- the git directory is always named (`--git-dir`, and `--work-tree` for a checkout), so a
  `.git` file, `commondir` or `config.worktree` an agent wrote is never followed;
- the environment is built from nothing (no App key, webhook secret or model key; a
  credential only in `env` of the one fetch or push that needs it, scoped to its URL),
  with system and global configuration off;
- hooks, fsmonitor, maintenance, submodule recursion, credential helpers and every
  transport but file/http(s) are switched off on the command line, which outranks any
  repository configuration;
- each command has a time limit and is killed, with its process group, on timeout or
  cancellation.

Merges need no checkout: `git merge-tree --write-tree` computes the result (or the
conflicts) and `git commit-tree` + `git update-ref` record it, in milliseconds at any
repository size (docs/performance.md). A conflict is returned, never resolved silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.core.errors import OrchestratorError

GIT_TIMEOUT_S = 300.0
NETWORK_TIMEOUT_S = 1800.0
_HARDENING = (
    *("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false"),
    *("-c", "core.untrackedCache=false", "-c", "core.sshCommand=false"),
    *("-c", "core.attributesFile=/dev/null", "-c", "core.excludesFile=/dev/null"),
    *("-c", "maintenance.auto=false", "-c", "gc.auto=0", "-c", "credential.helper="),
    *("-c", "diff.ignoreSubmodules=all", "-c", "submodule.recurse=false"),
    *("-c", "protocol.allow=never", "-c", "protocol.file.allow=always"),
    *("-c", "protocol.https.allow=always", "-c", "protocol.http.allow=always"),
    *("-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false", "-c", "core.quotePath=false"),
)
_BASE_ENV = {
    "LC_ALL": "C",
    "HOME": "/nonexistent",
    "XDG_CONFIG_HOME": "/nonexistent",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": "/dev/null",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_ASKPASS": "/bin/false",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_PROTOCOL_FROM_USER": "0",
}


class GitError(OrchestratorError):
    """A git command failed; the message has the command and git's own words."""


def git_binary() -> str:
    """The absolute path of git, found once on a fixed system PATH, never the caller's."""
    found = shutil.which("git", path="/usr/local/bin:/usr/bin:/bin") or shutil.which("git")
    if found is None:
        raise GitError("git is not installed (looked in /usr/local/bin, /usr/bin, /bin, PATH)")
    return os.path.realpath(found)


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of an engine git command: fixed values, then `extra`."""
    binary = git_binary()
    path = ":".join(dict.fromkeys([os.path.dirname(binary), "/usr/local/bin", "/usr/bin", "/bin"]))
    return {**_BASE_ENV, "PATH": path, **(extra or {})}


def auth_env(url: str, header: str | None) -> dict[str, str]:
    """Git configuration, in the environment, that sends `header` to `url` and nowhere else.

    The credential is never an argument (arguments show in error messages and in `ps`)
    and is scoped to the one URL, so a redirect or another remote never receives it.
    """
    if header is None:
        return {}
    return {
        "GIT_CONFIG_COUNT": "1",
        "GIT_CONFIG_KEY_0": f"http.{url}.extraHeader",
        "GIT_CONFIG_VALUE_0": header,
    }


def refuse_option(value: str, what: str) -> str:
    """`value` (a remote or source the engine names), or GitError when git would read it as
    an option."""
    if value.startswith("-"):
        raise GitError(f"{what} {value!r} would be read as a git option")
    return value


def hardened(git_dir: Path | None, work_tree: Path | None, *args: str) -> list[str]:
    """The argv of an engine git command: named directories, hardening, then `args`."""
    where = [] if git_dir is None else ["--git-dir", str(git_dir)]
    if work_tree is not None:
        where += ["--work-tree", str(work_tree)]
    return [git_binary(), *where, *_HARDENING, *args]


async def git(
    git_dir: Path | None,
    *args: str,
    work_tree: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout_s: float = GIT_TIMEOUT_S,
) -> tuple[int, str]:
    """Run hardened git on the repository at `git_dir`; return (exit code, stdout).

    `work_tree` names the checkout for commands that need one; `env` adds to the fixed
    environment (a scoped credential travels this way). Raises GitError when `check` and
    the command fails or runs past `timeout_s`.
    """
    code, out = await git_bytes(
        git_dir, *args, work_tree=work_tree, env=env, check=check, timeout_s=timeout_s
    )
    return code, out.decode()


async def git_bytes(
    git_dir: Path | None,
    *args: str,
    work_tree: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    timeout_s: float = GIT_TIMEOUT_S,
) -> tuple[int, bytes]:
    """`git`, with stdout as git wrote it: for output an agent's files shape (a diff, file
    names), which need not be UTF-8."""
    cwd = work_tree or git_dir or Path("/")
    process = await asyncio.create_subprocess_exec(
        *hardened(git_dir, work_tree, *args),
        cwd=cwd if cwd.is_dir() else cwd.parent,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=git_env(env),
        start_new_session=True,
    )
    try:
        async with asyncio.timeout(timeout_s):
            out, err = await process.communicate()
    except TimeoutError:
        raise GitError(
            f"git {' '.join(args)} in {git_dir} ran past {timeout_s:g} s and was killed"
        ) from None
    finally:
        if process.returncode is None:  # timed out or cancelled: nothing it started survives
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()
    code = process.returncode if process.returncode is not None else -1
    if check and code != 0:
        said = err.decode(errors="replace").strip()
        raise GitError(f"git {' '.join(args)} failed in {git_dir}: {said}")
    return code, out


def slug(text: str, *, limit: int = 40) -> str:
    """A branch-safe slug of `text`, at most `limit` characters, cut between words (within
    a word only when its first word alone is longer)."""
    words = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    if len(words) > limit:
        cut = words[: limit + 1]
        words = cut.rsplit("-", 1)[0] if "-" in cut else words[:limit]
    return words.rstrip("-") or "job"


async def rev(git_dir: Path, name: str) -> str | None:
    """The commit `name` points at, or None."""
    code, out = await git(
        git_dir, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False
    )
    return out.strip() if code == 0 else None


CONFIG = (
    "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = true\n[gc]\n\tauto = 0\n"
)


# What git says when the ref it pushes is being updated by another push at that very moment
# (the remote holds the ref's lock): a lost race, as a push that is no fast-forward is.
_CONTENDED = ("cannot lock ref", "failed to update ref", "incorrect old value")


def contended(said: str) -> bool:
    """Whether a failed push's words say another push held the ref at that moment."""
    return any(words in said for words in _CONTENDED)


def reset_config(repo: Path) -> None:
    """Rewrite an engine repository's config to the engine's own, whatever is there now.

    Agents cannot write the engine's repositories when sandboxed; this also holds when
    they are not (TEAPARTY_SANDBOX=off), where a `url.*.insteadOf`, `filter.*` or
    `core.sshCommand` there would otherwise steer the engine's next command. A symlink in
    its place is replaced, never followed.
    """
    fresh = repo / "config.teaparty-new"
    fresh.unlink(missing_ok=True)
    descriptor = os.open(fresh, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    with os.fdopen(descriptor, "w") as file:
        file.write(CONFIG)
    os.replace(fresh, repo / "config")


async def ensure_branch(git_dir: Path, branch: str, start: str) -> str:
    """Create `branch` at `start` unless it exists; return its commit."""
    if (commit := await rev(git_dir, f"refs/heads/{branch}")) is not None:
        return commit
    await git(git_dir, "branch", branch, start)
    commit = await rev(git_dir, f"refs/heads/{branch}")
    assert commit is not None
    return commit


@dataclass(frozen=True)
class Checkout:
    """A linked worktree: the files (agent-writable) and its admin directory (engine-only).

    The engine reaches the checkout only through `admin`, the directory git keeps under
    the repository's `worktrees/`, never through the `.git` file in `path`.
    """

    repo: Path
    path: Path

    @property
    def admin(self) -> Path:
        """The worktree's git directory inside the repository."""
        return self.repo / "worktrees" / self.path.name

    def exists(self) -> bool:
        """Whether git knows this worktree at this path and the files are there."""
        try:
            recorded = (self.admin / "gitdir").read_text().strip()
        except OSError:
            return False
        return recorded == str(self.path / ".git") and self.path.is_dir()

    def restore_gitfile(self) -> bool:
        """Make `path/.git` again the file that names this checkout's admin directory, as git
        wrote it; whether it had to. An agent owns the worktree, so it may have put a
        repository of its own there (a planted config whose fsmonitor the next agent's
        `git status` would run, a history that shows a reviewer another diff) or pointed the
        file elsewhere; the engine's own git never reads it."""
        dotgit = self.path / ".git"
        wanted = f"gitdir: {self.admin}\n".encode()
        if _small_regular_file(dotgit) == wanted:
            return False
        if dotgit.is_dir() and not dotgit.is_symlink():
            shutil.rmtree(dotgit)
        else:
            dotgit.unlink(missing_ok=True)
        dotgit.write_bytes(wanted)
        return True

    async def git(self, *args: str, check: bool = True) -> tuple[int, str]:
        """Run git in this checkout, with its directories named by the engine."""
        return await git(self.admin, *args, work_tree=self.path, check=check)

    async def branch(self) -> str | None:
        """The branch checked out, or None when HEAD is detached."""
        code, out = await git(self.admin, "symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        return out.strip() if code == 0 else None


def _small_regular_file(path: Path, limit: int = 4096) -> bytes | None:
    """The content of `path` if it is a regular file of at most `limit` bytes (read without
    following a symlink or waiting on a FIFO), else None."""
    try:
        status = os.lstat(path)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return os.read(fd, limit + 1)
    finally:
        os.close(fd)


async def add_worktree(repo: Path, path: Path, start: str) -> Checkout:
    """A detached linked worktree of `repo` at `path` on `start`; a broken one is made anew.

    The worktree's basename names its admin directory, so every worktree of one repository
    has its own basename (`worktree`, `slot-1`, ...).
    """
    checkout = Checkout(repo, path)
    if checkout.exists():
        return checkout
    shutil.rmtree(path, ignore_errors=True)
    shutil.rmtree(checkout.admin, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    await git(repo, "worktree", "prune")
    await git(repo, "worktree", "add", "--quiet", "--detach", str(path), start)
    if not checkout.exists():
        raise GitError(f"git worktree add made no admin directory {checkout.admin} for {path}")
    return checkout


async def remove_worktrees(repo: Path, paths: list[Path]) -> None:
    """Delete worktrees' files and let git forget them (branches stay)."""
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    if paths and (repo / "HEAD").exists():
        await git(repo, "worktree", "prune")


def strip_nested_repositories(root: Path) -> list[str]:
    """Delete every `.git` below `root`'s top level; the paths removed, relative to `root`.

    A nested repository in an agent's worktree would make the engine's `git add` run git
    inside it, under that repository's own configuration (fsmonitor, filters): agent code.
    """
    removed: list[str] = []
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            if entry.name == ".git" and folder != root:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                removed.append(os.path.relpath(entry.path, root))
            elif entry.is_dir(follow_symlinks=False) and not (
                folder == root and entry.name == ".git"
            ):
                stack.append(Path(entry.path))
    return sorted(removed)


@dataclass(frozen=True)
class Committed:
    """What the engine committed from a worktree: the commit (None if nothing changed)."""

    commit: str | None
    stripped: tuple[str, ...] = ()


async def commit_all(
    checkout: Checkout, message: str, *, author: tuple[str, str], committer: tuple[str, str]
) -> Committed:
    """Commit everything in the worktree (ignored files aside); concludes a merge in progress.

    The engine makes the commits, so agents never need to write a git directory.
    Idempotent: a clean worktree with no merge in progress commits nothing.
    """
    stripped = tuple(strip_nested_repositories(checkout.path))
    await checkout.git("add", "-A")
    merging = (checkout.admin / "MERGE_HEAD").exists()
    code, _ = await checkout.git("diff", "--cached", "--quiet", check=False)
    if code == 0 and not merging:
        return Committed(None, stripped)
    env = {
        "GIT_AUTHOR_NAME": author[0],
        "GIT_AUTHOR_EMAIL": author[1],
        "GIT_COMMITTER_NAME": committer[0],
        "GIT_COMMITTER_EMAIL": committer[1],
    }
    await git(
        checkout.admin,
        *("commit", "--quiet", "--no-verify", "--cleanup=strip"),
        *("-m", message or "Work on the task"),
        work_tree=checkout.path,
        env=env,
    )
    head = await rev(checkout.admin, "HEAD")
    return Committed(head, stripped)


@dataclass(frozen=True)
class Merge:
    """The outcome of merging one branch into another: a commit, or the conflicting files."""

    commit: str | None
    conflicts: tuple[str, ...] = ()
    tree: str | None = None  # on a conflict: the merged tree, with conflict markers in files
    target: str | None = None  # on a conflict: the commits it was between (into, source)
    source: str | None = None


IDENTITY = ("teaparty", "teaparty@users.noreply.localhost")


async def merge(
    repo: Path, *, into: str, source: str, message: str, identity: tuple[str, str] = IDENTITY
) -> Merge:
    """Merge `source` into branch `into` without a checkout (--no-ff); conflicts come back.

    Merging what is already merged changes nothing, so a retried merge is harmless.
    """
    target = await rev(repo, f"refs/heads/{into}")
    head = await rev(repo, source)
    if target is None or head is None:
        raise GitError(f"cannot merge {source!r} into {into!r}: a branch is missing")
    code, _ = await git(repo, "merge-base", "--is-ancestor", head, target, check=False)
    if code == 0:
        return Merge(target)
    code, out = await git(
        repo,
        *("merge-tree", "--write-tree", "--name-only", "--no-messages", target, head),
        check=False,
    )
    lines = out.splitlines()
    if code == 1:
        return Merge(None, tuple(line for line in lines[1:] if line), lines[0], target, head)
    if code != 0:
        raise GitError(f"git merge-tree failed for {source!r} into {into!r}")
    name, email = identity
    _, commit = await git(
        repo,
        *("-c", f"user.name={name}", "-c", f"user.email={email}"),
        *("commit-tree", lines[0], "-p", target, "-p", head, "-m", message),
    )
    await git(repo, "update-ref", f"refs/heads/{into}", commit.strip(), target)
    return Merge(commit.strip())


async def merge_tree(repo: Path, target: str, source: str) -> Merge:
    """What merging commit `source` into commit `target` would give, moving nothing: the
    merged tree and the files that conflict (none: it merges cleanly); `commit` is None."""
    code, out = await git(
        repo,
        *("merge-tree", "--write-tree", "--name-only", "--no-messages", target, source),
        check=False,
    )
    lines = out.splitlines()
    if code not in (0, 1) or not lines:
        raise GitError(f"git merge-tree failed for {source!r} into {target!r}")
    files = tuple(line for line in lines[1:] if line) if code == 1 else ()
    return Merge(None, files, lines[0], target, source)


async def commit_index(
    repo: Path, env: Mapping[str, str], *, parent: str, message: str, ref: str
) -> str:
    """Commit the index `env` names (GIT_INDEX_FILE) as the engine, on `parent`, and move
    `ref` to it only if it still points at `parent`; the new commit."""
    _, tree = await git(repo, "write-tree", env=env)
    name, email = IDENTITY
    _, commit = await git(
        repo,
        *("-c", f"user.name={name}", "-c", f"user.email={email}"),
        *("commit-tree", tree.strip(), "-p", parent, "-m", message),
    )
    await git(repo, "update-ref", ref, commit.strip(), parent)
    return commit.strip()
