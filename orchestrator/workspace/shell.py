"""The agent's shell and search in its worktree: sandboxed, an allowlisted env, a cap."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Protocol

from pydantic import Field

from orchestrator.core.errors import LimitError, SandboxError, ToolError
from orchestrator.core.secrecy import SECRET_NAME, agent_gets, setup_refusal
from orchestrator.core.tools import ToolInput, no_nul, spec
from orchestrator.sandbox.confine import NO_NETWORK, Network, Place, Sandbox, agent_path
from orchestrator.sandbox.netproxy import Refusal
from orchestrator.sandbox.processes import CappedOutput, run_process
from orchestrator.workspace.git import Checkout, git_env, hardened

_GREP = ("grep", "-n", "-I", "-E", "--untracked", "--no-color")


class ShellInput(ToolInput):
    command: Annotated[str, no_nul] = Field(description="bash command line")
    timeout_s: float | None = Field(None, gt=0, description="seconds")


SHELL_SPEC = spec(
    "shell",
    "Run a bash command in the worktree root with no input and no secrets in its environment. "
    "Returns combined stdout and stderr (long output keeps its head and tail) and the exit "
    "code. The command and everything it started are killed when it ends or times out, so "
    "background servers do not survive the call.",
    ShellInput,
)


class EgressWatch(Protocol):
    """What the engine makes of an agent's shell call's network (jobs/network_gate.py):
    hosts approved for its job beyond its project's, and what it was refused."""

    async def granted(self, conversation_id: str) -> tuple[str, ...]:
        """Hosts the conversation's job may reach beyond its project's `sandbox.network`."""
        ...

    async def refused(
        self, conversation_id: str, *, agent: str, command: str, refusals: Mapping[Refusal, int]
    ) -> str:
        """Record what the call was refused; a note for the agent's result ('' for none)."""
        ...


Caller = tuple[str, str]
"""Who makes a shell call: the agent and its conversation."""


class WorktreeShell:
    """Runs the agent's commands in the sandbox, and git grep for it, in its worktree."""

    def __init__(
        self,
        place: Place,
        *,
        sandbox: Sandbox,
        parent_env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        checkout: Checkout | None = None,
        network: Network = NO_NETWORK,
        egress: EgressWatch | None = None,
    ) -> None:
        self.place = place
        self.root = place.work
        self.sandbox = sandbox
        self.env = agent_env(parent_env, sandbox=sandbox)
        self.timeout_s = timeout_s
        self.cap = cap
        self.checkout = checkout
        self.network = network
        self.egress = egress

    async def command(
        self, command: str, *, timeout_s: float | None = None, caller: Caller | None = None
    ) -> str:
        """Run a bash command line in the sandbox; the result ends with its exit code.
        LimitError when the call went past the disk the task may use (it was stopped).

        With an egress watch and a `caller`, the call reaches its project's hosts and those
        approved for its job, and what it was refused is reported (`EgressWatch.refused`),
        whose note the result carries."""
        limit = min(timeout_s or self.timeout_s, self.timeout_s)
        network, refused = await self._network(caller)
        try:
            done = await self.sandbox.run(
                command,
                place=self.place,
                env=self.env,
                timeout_s=limit,
                cap=self.cap,
                network=network,
                refused=refused,
            )
        except SandboxError as exc:
            raise ToolError(f"shell: {exc}") from exc
        told = ""
        if refused and self.egress is not None and caller is not None:
            told = await self.egress.refused(
                caller[1], agent=caller[0], command=command, refusals=refused
            )
        text = "\n".join(part for part in (done.output.text().rstrip("\n"), told) if part)
        if done.stopped is not None:
            raise LimitError(done.stopped, output=text)
        if done.returncode is None:
            raise ToolError(
                f"shell: timed out after {limit} s; the command and its children were killed. "
                f"Output so far:\n{text}"
            )
        note = self.sandbox.explain(done)
        return "\n".join(part for part in (text, note, f"[exit code {done.returncode}]") if part)

    async def _network(self, caller: Caller | None) -> tuple[Network, Counter[Refusal] | None]:
        """The call's network (its project's, widened by its job's approvals) and, where its
        refusals are wanted, the counter they go into."""
        if self.egress is None or caller is None:
            return self.network, None
        if self.network.open or not self.sandbox.confined:
            return self.network, None
        granted = await self.egress.granted(caller[1])
        hosts = tuple(dict.fromkeys((*self.network.hosts, *granted)))
        return Network(hosts=hosts), Counter()

    async def grep(self, pattern: str, *, top: Path, glob: str | None) -> str:
        """Search text files under `top` for an extended regex; git grep skips ignored files.

        git runs here in the engine, on directories the engine names, with hardened
        configuration: what the agent wrote in its worktree is read as data only.
        """
        where = top.relative_to(self.root).as_posix()
        if glob and where != ".":
            glob = f"{where}/{glob}"
        if self.checkout is None or not self.checkout.exists():
            return await asyncio.to_thread(self._walk_grep, pattern, top=top, glob=glob)
        spec = glob or where
        argv = hardened(self.checkout.admin, self.root, *_GREP, "-e", pattern, "--", spec)
        done = await run_process(
            argv, cwd=self.root, env=git_env(), timeout_s=self.timeout_s, cap=self.cap
        )
        if done.returncode == 1:
            return "no matches"
        if done.returncode is None:
            raise ToolError(f"search: timed out after {self.timeout_s} s; narrow the path")
        if done.returncode != 0:
            raise ToolError(f"search: {done.output.text().strip()}")
        return done.output.text()

    def _walk_grep(self, pattern: str, *, top: Path, glob: str | None) -> str:
        # Python's re stands in for POSIX ERE here; the two agree on everyday patterns.
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"search: bad pattern {pattern!r}: {exc}") from exc
        output = CappedOutput(self.cap)
        for path in _files(top):
            name = path.relative_to(self.root).as_posix()
            data = path.read_bytes()
            if (glob and path != top and not fnmatch.fnmatchcase(name, glob)) or b"\0" in data:
                continue
            for number, line in enumerate(data.decode(errors="replace").splitlines(), 1):
                if regex.search(line):
                    output.feed(f"{name}:{number}:{line}\n".encode())
        return output.text() or "no matches"


def agent_env(parent_env: Mapping[str, str], *, sandbox: Sandbox) -> dict[str, str]:
    """The environment of the agent's processes: the variables `agent_gets` names (the
    locale, the terminal, the commit identity), minus any holding a secret, and the engine's
    own values; the sandbox adds HOME, TMPDIR and the egress proxy's.

    The agent's git may read repositories it does not own (its job's git data belongs to
    the engine), so safe.directory is set for it on the command-line level git honours.
    """
    secrets = [value for name, value in parent_env.items() if SECRET_NAME.search(name) and value]
    env = {
        name: value
        for name, value in sorted(parent_env.items())
        if agent_gets(name) and not any(secret in value for secret in secrets)
    }
    path = agent_path(parent_env, sandbox.system)
    if any(secret in path for secret in secrets):
        path = "/usr/local/bin:/usr/bin:/bin"
    return env | {
        "PATH": path,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_PARAMETERS": "'safe.directory'='*'",
    }


def setup_env(
    parent_env: Mapping[str, str], names: Sequence[str], *, sandbox: Sandbox
) -> dict[str, str]:
    """The environment of a repository's setup step: an agent's, and the operator's setup
    secrets (`TEAPARTY_SETUP_SECRETS`, read by the edge) among `names` that are set.

    SandboxError when a name is one no setup may get (the App's credentials, the model's
    key, a run's token): the edge refuses those at start, and this holds even if it did not.
    """
    for name in names:
        if (why := setup_refusal(name)) is not None:
            raise SandboxError(f"TEAPARTY_SETUP_SECRETS: {why}")
    given = {name: parent_env[name] for name in names if parent_env.get(name)}
    return agent_env(parent_env, sandbox=sandbox) | given


def _files(top: Path) -> list[Path]:
    """Regular files at or under `top`, never inside .git nor through a symlink."""
    if not top.is_dir():
        return [top]
    found = []
    for folder, dirs, files in os.walk(top):
        dirs[:] = sorted(d for d in dirs if d.casefold() != ".git")
        found += [Path(folder, name) for name in sorted(files)]
    return [path for path in found if path.is_file() and not path.is_symlink()]
