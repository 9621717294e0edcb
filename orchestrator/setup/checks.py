"""The project's checks, run by the engine: its test command (and lint command, if it names
one) on exactly one commit, in the sandbox, in the job's prepared environment.

Each check runs in a fresh checkout of the commit's files (never the worktree an agent
works in, which may hold what the commit does not), as the user a task's agent would be,
with the project's network, and the checkout is removed after it. What decides the result
is the command's exit code alone: the counts read from its output (`12 passed, 1 failed`)
are shown beside it, never trusted for it, since the code under test prints what it likes.
A command the sandbox could not start (exit 126 or 127: a missing tool) is a check that did
not run, never one that passed.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.confine import Network, Place, Prepared, Sandbox
from orchestrator.setup.prepare import check_out, chown_tree
from orchestrator.workspace.git import GitError
from orchestrator.workspace.shell import agent_env

Status = Literal["passed", "failed", "not run"]
TAIL_CHARS = 3000  # of a failed command's output, in the record, the briefs and the PR
_OUTPUT_CAP = 400_000
_NOT_STARTED = {126: "the command could not be executed", 127: "a command was not found"}
# What test runners print as their totals (counts only: the words are ours).
_COUNTS = (
    # pytest, jest and vitest ("Tests: 1 failed, 12 passed"), cargo ("12 passed; 0 failed")
    re.compile(r"\b(\d+) (passed|failed|errors?|skipped|xfailed|xpassed)\b"),
    re.compile(r"^# (pass|fail|skipped) (\d+)$", re.M),  # node --test, TAP
    re.compile(r"^Ran (\d+) (tests?)", re.M),  # unittest
)
_WORDS = {"error": "errors", "errors": "errors", "pass": "passed", "fail": "failed"}
_WORDS |= {"test": "run", "tests": "run"}


@dataclass(frozen=True)
class CommandRun:
    """One command of a check: how it ended, what it printed as its totals, and the end
    of its output when it did not pass."""

    name: str  # "test" or "lint"
    command: str
    status: Status
    exit_code: int | None  # None: stopped (its time, or a sandbox limit)
    seconds: float
    counts: str = ""  # e.g. "12 passed, 1 failed": read from the output, for people
    reason: str = ""  # why it did not run, or what stopped it
    tail: str = ""  # the end of its output (shown where it did not pass)

    def line(self) -> str:
        """One line: `pytest -q` passed (12 passed) in 3.1 s."""
        said = {"passed": "passed", "failed": "FAILED", "not run": "could not run"}[self.status]
        detail = "; ".join(part for part in (self.counts, self.reason) if part)
        detail = f" ({detail})" if detail else ""
        return f"{self.name} `{self.command}` {said}{detail} in {self.seconds:.1f} s"


@dataclass(frozen=True)
class Checked:
    """The project's checks on one commit: passed only when every command passed; not run
    when one could not run (and none failed); failed otherwise."""

    commit: str
    status: Status
    runs: tuple[CommandRun, ...] = ()
    reason: str = ""  # when nothing ran at all: why

    def summary(self) -> str:
        """What the checks found, one line per command, for briefs and reports."""
        if not self.runs:
            return f"The project's checks could not run on {self.commit[:12]}: {self.reason}"
        lines = [f"The project's checks on {self.commit[:12]}, run by the engine in the sandbox:"]
        lines += [f"- {run.line()}" for run in self.runs]
        return "\n".join(lines)

    def report(self) -> str:
        """The summary, and the end of every command's output that did not pass."""
        parts = [self.summary()]
        for run in self.runs:
            if run.status != "passed" and run.tail:
                parts.append(f"End of the output of `{run.command}`:\n{run.tail}")
        return "\n\n".join(parts)

    def to_json(self) -> str:
        """The record as stored."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Checked:
        """A stored record back."""
        data = json.loads(text)
        runs = tuple(CommandRun(**run) for run in data.pop("runs", ()))
        return cls(**data, runs=runs)


def not_run(commit: str, reason: str) -> Checked:
    """A check that could not start at all (no sandbox, no environment)."""
    return Checked(commit, "not run", (), reason)


def counts(output: str) -> str:
    """The totals a test runner printed (`3 failed, 12 passed`), the last report's, or ''."""
    found: dict[str, int] = {}
    for pattern in _COUNTS:
        for match in pattern.finditer(output[-20_000:]):
            groups = match.groups()
            pairs = zip(groups[0::2], groups[1::2], strict=True)
            for first, second in pairs:
                number, word = (first, second) if first.isdigit() else (second, first)
                found[_WORDS.get(word, word)] = int(number)
    return ", ".join(f"{n} {word}" for word, n in found.items())


class Checker:
    """Runs a project's check commands on a commit of a job's repository.

    `root` is where the checkouts go (the engine's, never an agent's); `owner(path)` is the
    user a checkout's processes run as (None: the engine's), `forget(path)` gives it back;
    `mask(text)` hides every secret value the engine knows in what is recorded.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        root: Path,
        *,
        parent_env: Mapping[str, str],
        owner: Callable[[Path], tuple[int, int] | None] = lambda _: None,
        forget: Callable[[Path], None] = lambda _: None,
        mask: Callable[[str], str] = lambda text: text,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sandbox = sandbox
        self.root = root
        self.env = agent_env(parent_env, sandbox=sandbox)
        self.owner = owner
        self.forget = forget
        self.mask = mask
        self.clock = clock

    async def sweep(self) -> None:
        """Remove the checkouts of checks a crash cut short (one engine per state
        directory: none is running)."""
        if self.root.is_dir():
            for folder in await asyncio.to_thread(lambda: list(self.root.iterdir())):
                await asyncio.to_thread(shutil.rmtree, folder, True)

    async def check(
        self,
        *,
        repo: Path,
        commit: str,
        commands: Sequence[tuple[str, str]],
        prepared: Prepared | None,
        network: Network,
        timeout_s: float,
    ) -> Checked:
        """Run `commands` ((name, command line), in order) on `commit`'s files."""
        if self.sandbox.mode == "unavailable":
            return not_run(commit, f"this host cannot sandbox commands ({self.sandbox.reason})")
        await asyncio.to_thread(self.root.mkdir, parents=True, exist_ok=True, mode=0o711)
        folder = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=self.root))
        os.chmod(folder, 0o711)
        work = folder / "work"
        try:
            try:
                await check_out(repo, commit, work)
            except (GitError, OSError) as exc:  # said on the PR as not run, never a crash
                return not_run(commit, f"its files could not be checked out: {exc}")
            who = self.owner(work)
            if who is not None:
                await asyncio.to_thread(chown_tree, work, who)
            place = Place(work, writable=True, run_as=who, prepared=prepared)
            deadline = self.clock() + timeout_s
            runs: list[CommandRun] = []
            for name, command in commands:
                runs.append(await self._run(name, command, place, network, deadline))
        finally:
            self.forget(work)
            await asyncio.to_thread(shutil.rmtree, folder, True)
        return Checked(commit, _overall(runs), tuple(runs))

    async def _run(
        self, name: str, command: str, place: Place, network: Network, deadline: float
    ) -> CommandRun:
        started = self.clock()
        left = deadline - started
        if left <= 0:
            return CommandRun(name, command, "not run", None, 0.0, reason="no time was left")
        try:
            done = await self.sandbox.run(
                command, place=place, env=self.env, timeout_s=left, cap=_OUTPUT_CAP, network=network
            )
        except SandboxError as exc:
            return CommandRun(name, command, "not run", None, 0.0, reason=str(exc))
        seconds = round(self.clock() - started, 1)
        output = done.output.text()
        tail = self.mask(output[-TAIL_CHARS:]).strip()
        code = done.returncode
        if done.stopped is not None or code is None:
            reason = done.stopped or f"stopped at its time limit ({left:.0f} s)"
            return CommandRun(name, command, "failed", None, seconds, counts(output), reason, tail)
        if code == 0:
            return CommandRun(name, command, "passed", 0, seconds, counts(output), tail=tail)
        if code in _NOT_STARTED:
            reason = f"exit {code}: {_NOT_STARTED[code]}"
            return CommandRun(name, command, "not run", code, seconds, "", reason, tail)
        note = self.sandbox.explain(done)
        reason = f"exit {code}" + (f"; {note}" if note else "")
        return CommandRun(name, command, "failed", code, seconds, counts(output), reason, tail)


def _overall(runs: Sequence[CommandRun]) -> Status:
    if any(run.status == "failed" for run in runs):
        return "failed"
    if any(run.status == "not run" for run in runs) or not runs:
        return "not run"
    return "passed"
