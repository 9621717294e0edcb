"""A repository's `setup:`, run once per cache key in the sandbox, its result kept for every
task of the job and for later jobs of the repository.

The setup runs in a checkout of the job's base commit made for it (files only, no git data)
under the repository's cache (setup/cache.py), as an agent's shell would, with only the
network `setup.network` names and the operator's setup secrets among `setup.secrets`. A
failing command stops the rest (as a CI job's steps do) but not the job: what was reached
is used, the agents are told the environment is incomplete, and the next job tries again.

Then the checkout's tracked files are removed: what is left (a virtualenv, `node_modules`,
build output) is the prepared environment, shown in each task's worktree at the same paths
(sandbox/confine.py `Prepared`). A `.pth` in each virtualenv maps the checkout's path to
the worktree of the call (TEAPARTY_WORKTREE), so an editable install imports the task's
code, never the checkout's (which is gone: a miss is an ImportError, not old code).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from orchestrator.config.schema import SetupSettings
from orchestrator.core.ecosystems import hosts_of
from orchestrator.core.protected import compile_pattern
from orchestrator.sandbox.confine import Network, Place, Prepared, Sandbox
from orchestrator.setup.cache import Entry, SetupCache
from orchestrator.workspace.git import git, git_bytes
from orchestrator.workspace.shell import setup_env

TAIL_CHARS = 2000  # of a step's output, in the record and the tracking comment
_OUTPUT_CAP = 200_000
_PTH = "zzzz_teaparty_worktree.pth"  # processed after the installers' own .pth files
_MODULE = "_teaparty_worktree"
_MODULE_TEXT = """\"\"\"Written by TeaParty's setup: paths into the checkout the environment was
prepared in ({root}) lead into the worktree of the call (TEAPARTY_WORKTREE) instead.\"\"\"

import os
import sys

_ROOT = {root!r}


def _moved(value):
    work = os.environ.get("TEAPARTY_WORKTREE")
    if work and isinstance(value, str) and (value == _ROOT or value.startswith(_ROOT + "/")):
        return work + value[len(_ROOT):]
    return value


sys.path[:] = [_moved(path) for path in sys.path]
for _name, _module in list(sys.modules.items()):
    if _name.startswith("__editable__") and isinstance(getattr(_module, "MAPPING", None), dict):
        _module.MAPPING = {{key: _moved(value) for key, value in _module.MAPPING.items()}}
"""


@dataclass(frozen=True)
class Step:
    """One setup command as it ran: its exit code (None: stopped at the time limit, or by
    the sandbox), seconds, and the end of its output (secrets masked)."""

    command: str
    exit_code: int | None
    seconds: float
    tail: str
    note: str = ""

    @property
    def ok(self) -> bool:
        """Whether the command succeeded."""
        return self.exit_code == 0


@dataclass(frozen=True)
class Outcome:
    """What a job's setup gave: the environment, the steps that made it, and whether this
    job reused one an earlier job prepared."""

    key: str
    root: Path
    paths: tuple[str, ...]
    bin: tuple[str, ...]
    steps: tuple[Step, ...]
    test: str | None
    reused: bool = False
    seconds: float = 0.0
    skipped: tuple[str, ...] = ()  # files setup left outside a directory: not shown to tasks
    withheld: tuple[str, ...] = ()  # secrets named that the operator did not make available

    @property
    def ok(self) -> bool:
        """Whether every command succeeded."""
        return all(step.ok for step in self.steps)

    @property
    def failed(self) -> Step | None:
        """The command that failed, if one did."""
        return next((step for step in self.steps if not step.ok), None)

    def prepared(self) -> Prepared | None:
        """The environment for the sandbox; None when setup left nothing to show."""
        return Prepared(self.root, self.paths, self.bin) if self.paths else None

    def brief(self) -> str:
        """What the agents read about their environment."""
        shown = ", ".join(self.paths) or "nothing"
        first = f"The repository's setup prepared: {shown} (read-only; what you write there ends"
        lines = [first + " with the call)."]
        if self.bin:
            lines.append(f"First on your PATH: {', '.join(self.bin)}.")
        if (step := self.failed) is not None:
            lines.append(
                f"The environment is INCOMPLETE: setup step `{step.command}` "
                f"{_ended(step)}; later steps did not run. Its output ended:\n{step.tail}"
            )
        if self.test:
            lines.append(f"The project's test command: `{self.test}`.")
        return "\n".join(lines)

    def summary(self) -> str:
        """One line for the tracking comment."""
        how = "reused" if self.reused else f"prepared in {self.seconds:.0f} s"
        if (step := self.failed) is not None:
            return f"setup: step `{step.command}` {_ended(step)}; the job goes on without the rest"
        return f"setup: {how} ({len(self.steps)} steps; {', '.join(self.paths) or 'nothing kept'})"

    def to_json(self) -> str:
        """The outcome as its record holds it."""
        data = asdict(self)
        data["root"] = str(self.root)
        return json.dumps(data, indent=1)

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        """An outcome from its record."""
        data = json.loads(text)
        return cls(
            key=data["key"],
            root=Path(data["root"]),
            paths=tuple(data["paths"]),
            bin=tuple(data["bin"]),
            steps=tuple(Step(**step) for step in data["steps"]),
            test=data["test"],
            reused=data.get("reused", False),
            seconds=data.get("seconds", 0.0),
            skipped=tuple(data.get("skipped", ())),
            withheld=tuple(data.get("withheld", ())),
        )


def _ended(step: Step) -> str:
    if step.exit_code is None:
        return f"was stopped{f' ({step.note})' if step.note else ''}"
    return f"exited {step.exit_code}"


async def cache_key(repo: Path, base: str, name: str, setup: SetupSettings) -> str:
    """The key of a setup: the repository, the setup as written, and the content (git's
    blob ids) of every file at `base` that `setup.key_files` match."""
    patterns = [compile_pattern(pattern) for pattern in setup.key_files]
    _, listing = await git(repo, "ls-tree", "-r", "-z", "--full-tree", base)
    keyed = []
    for record in filter(None, listing.split("\0")):
        meta, path = record.split("\t", 1)
        if any(p.fullmatch(path.casefold()) for p in patterns):
            keyed.append((path, meta.split()[2]))
    text = json.dumps([name, setup.model_dump(mode="json"), sorted(keyed)], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


class Preparer:
    """Runs repositories' setups in the sandbox and keeps their results in the cache.

    `owner(path)` is the user a checkout's processes run as (None: the engine's), and
    `forget(path)` gives that user back once setup ended; `mask(text)` hides every secret
    value the engine knows in what is recorded and shown.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        cache: SetupCache,
        *,
        parent_env: Mapping[str, str],
        allowed: Sequence[str] = (),
        owner: Callable[[Path], tuple[int, int] | None] = lambda _: None,
        forget: Callable[[Path], None] = lambda _: None,
        mask: Callable[[str], str] = lambda text: text,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sandbox = sandbox
        self.cache = cache
        self.parent_env = dict(parent_env)
        self.allowed = tuple(allowed)
        self.owner = owner
        self.forget = forget
        self.mask = mask
        self.clock = clock

    async def prepare(self, *, name: str, repo: Path, base: str, setup: SetupSettings) -> Outcome:
        """The environment of `setup` for repository `name` (git data `repo`) at `base`:
        the cached one when a setup with the same key succeeded, else a fresh one."""
        key = await cache_key(repo, base, name, setup)
        async with self.cache.preparing(name, key) as found:
            if isinstance(found, str):
                return replace(Outcome.from_json(found), reused=True)
            outcome = await self._run(found, key, repo, base, setup)
            await found.settle(outcome.to_json(), reusable=outcome.ok)
            return outcome

    async def _run(
        self, entry: Entry, key: str, repo: Path, base: str, setup: SetupSettings
    ) -> Outcome:
        started = self.clock()
        root = entry.work
        tracked = await check_out(repo, base, root)
        granted = [name for name in setup.secrets if name in self.allowed]
        withheld = tuple(name for name in setup.secrets if name not in self.allowed)
        env = setup_env(self.parent_env, granted, sandbox=self.sandbox)
        network = Network(hosts=hosts_of(setup.network))
        who = self.owner(root)
        if who is not None:
            await asyncio.to_thread(chown_tree, root, who)
        steps: list[Step] = []
        deadline = started + setup.timeout_minutes * 60
        for command in setup.commands:
            left = deadline - self.clock()
            if left <= 0:
                steps.append(Step(command, None, 0.0, "", "the setup's time limit was reached"))
                break
            steps.append(await self._step(command, root, who, env, network, left))
            await entry.log(steps[-1].command, steps[-1].tail)
            if not steps[-1].ok:
                break
        await asyncio.to_thread(_settle_tree, root, tracked)
        self.forget(root)  # the checkout is the engine's again: its uid may go elsewhere
        paths, skipped = await asyncio.to_thread(_left_behind, root, tracked)
        bins = tuple(_bin_dirs(root, paths))
        await asyncio.to_thread(_relocate, root, paths)
        return Outcome(
            key=key,
            root=root,
            paths=paths,
            bin=bins,
            steps=tuple(steps),
            test=setup.test,
            seconds=round(self.clock() - started, 1),
            skipped=skipped,
            withheld=withheld,
        )

    async def _step(
        self,
        command: str,
        root: Path,
        who: tuple[int, int] | None,
        env: Mapping[str, str],
        network: Network,
        left: float,
    ) -> Step:
        started = self.clock()
        place = Place(root, writable=True, run_as=who)
        done = await self.sandbox.run(
            command, place=place, env=env, timeout_s=left, cap=_OUTPUT_CAP, network=network
        )
        note = done.stopped or (
            "the setup's time limit was reached" if done.returncode is None else ""
        )
        tail = self.mask(done.output.text()[-TAIL_CHARS:])
        explained = self.sandbox.explain(done)
        return Step(
            command,
            done.returncode,
            round(self.clock() - started, 1),
            f"{tail}\n{explained}".strip() if explained else tail,
            note,
        )


async def check_out(repo: Path, base: str, root: Path) -> frozenset[str]:
    """The files of `base` written under `root` by git (which never writes through a
    symlink it wrote); the paths it wrote."""
    await asyncio.to_thread(root.mkdir, parents=True, exist_ok=True)
    index = root.parent / "index"
    env = {"GIT_INDEX_FILE": str(index)}
    try:
        await git(repo, "read-tree", base, env=env)
        # the job's git data is bare: its files go to `root` as the work tree
        await git(repo, "checkout-index", "-a", "-f", work_tree=root, env=env)
    finally:
        index.unlink(missing_ok=True)
    _, listing = await git_bytes(repo, "ls-tree", "-r", "-z", "--name-only", "--full-tree", base)
    return frozenset(os.fsdecode(p) for p in listing.split(b"\0") if p)


def chown_tree(root: Path, who: tuple[int, int]) -> None:
    """Give `root` and everything under it (links themselves) to `who`."""
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(folder, name), *who)
    os.lchown(root, *who)


def _settle_tree(root: Path, tracked: frozenset[str]) -> None:
    """The checkout given back to the engine's user, readable by all, its tracked files
    removed (what stays is what setup made, in the tracked directories, left empty)."""
    me = (os.getuid(), os.getgid())
    for folder, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            os.lchown(path, *me)
            if not os.path.islink(path):
                mode = os.lstat(path).st_mode
                os.chmod(
                    path, (mode | 0o444 | (0o111 if mode & 0o111 or name in dirs else 0)) & ~0o022
                )
    os.lchown(root, *me)
    os.chmod(root, 0o755)
    for path in tracked:  # its directories stay: a path into them is still added to sys.path
        target = root / path
        if target.is_symlink() or target.is_file():
            target.unlink()


def _left_behind(root: Path, tracked: frozenset[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The directories setup made (the topmost of each, relative to `root`), and the files
    it made outside them (which tasks do not see)."""
    folders = {"."} | {str(Path(p).parent) for p in tracked}
    for path in list(folders):
        folders.update(str(parent) for parent in Path(path).parents)
    made: list[str] = []
    loose: list[str] = []
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        for name in sorted(dirs):
            path = os.path.normpath(os.path.join(relative, name))
            if path not in folders:
                made.append(path)
        dirs[:] = [d for d in dirs if os.path.normpath(os.path.join(relative, d)) in folders]
        loose += [os.path.normpath(os.path.join(relative, name)) for name in files]
    return tuple(sorted(made)), tuple(sorted(loose))


def _bin_dirs(root: Path, paths: tuple[str, ...]) -> list[str]:
    """The prepared directories that come first on PATH: virtualenvs' bin, then the
    top-level node_modules/.bin."""
    found = [f"{p}/bin" for p in paths if (root / p / "pyvenv.cfg").is_file()]
    if "node_modules" in paths and (root / "node_modules" / ".bin").is_dir():
        found.append("node_modules/.bin")
    return found


def _relocate(root: Path, paths: tuple[str, ...]) -> None:
    """A `.pth` in every virtualenv's site-packages mapping `root` to the call's worktree."""
    for path in paths:
        for site in (root / path).glob("lib/python*/site-packages"):
            if site.is_dir() and not site.is_symlink():
                (site / f"{_MODULE}.py").write_text(_MODULE_TEXT.format(root=str(root)))
                (site / _PTH).write_text(f"import {_MODULE}\n")
                for written in (site / f"{_MODULE}.py", site / _PTH):
                    os.chmod(written, 0o644)


def remove_checkout(root: Path) -> None:
    """Delete a setup's checkout (its cache entry is being dropped)."""
    shutil.rmtree(root, ignore_errors=True)
