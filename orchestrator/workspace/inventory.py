"""What an agent's shell has: the interpreters and tools its PATH finds inside the sandbox,
told in a few lines to the agents that have a shell, so none finds out by exit 127.

The survey is one call made as an agent's shell call is made (the same sandbox, PATH,
environment and user, and the project's prepared environment when it has one), in an empty
directory of its own. Each Python (`python3`, `python`) is asked for its version, its pip
and its pytest (`python -m pytest --version`: what a test run uses); every other tool for
its own version line. A PATH entry the host has but the call cannot see is named: Landlock
keeps the host's permissions, so the engine's Python under a private directory (a pyenv
build in /root, mode 0700) stays out of an unprivileged agent's reach there.
`Inventories` keeps each survey for the engine's lifetime.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import shlex
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.confine import NO_NETWORK, Network, Place, Prepared, Sandbox
from orchestrator.workspace.shell import agent_env

log = logging.getLogger(__name__)
PYTHONS = ("python3", "python")
TOOLS = (
    ("node", "--version"),
    ("npm", "--version"),
    ("npx", "--version"),
    ("go", "version"),
    ("cargo", "--version"),
    ("ruby", "--version"),
    ("java", "-version"),
    ("make", "--version"),
    ("gcc", "--version"),
)
_TIMEOUT_S = 60.0  # npm and java start slowly on a loaded host
_VERSION = re.compile(r"\d+(?:\.\d+)+")
# Each check writes a line of tab-separated fields to a file of its own, all at once (a
# JVM or node starts in about a second), then the lines are printed in order, and the
# PATH entries the call cannot see.
_SCRIPT = r"""
first() { local v=${1%%$'\n'*}; printf '%s' "${v//$'\t'/ }"; }
py() {
  local p v pip pytest
  p=$(command -v "$1") || { printf 'missing\t%s\n' "$1"; return; }
  v=$("$p" -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null) || v=
  pip=$("$p" -m pip --version 2>/dev/null) || pip=
  pytest=$("$p" -m pytest --version 2>&1) || pytest=
  printf 'python\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$p" "$(readlink -f "$p")" \
    "$(first "$v")" "$(first "$pip")" "$(first "$pytest")"
}
tool() {
  local p v
  p=$(command -v "$1") || { printf 'missing\t%s\n' "$1"; return; }
  v=$("$p" "$2" 2>&1) || v=
  printf 'tool\t%s\t%s\t%s\n' "$1" "$p" "$(first "$v")"
}
n=0
for check in {checks}; do
  $check >"$TMPDIR/inventory.$n" 2>/dev/null </dev/null &
  n=$((n + 1))
  # four at a time: each forks two or three, and a call may have few processes (a fork that
  # fails is retried by bash with growing waits: a whole survey took a minute at 24)
  [ $((n % 4)) -ne 0 ] || wait
done
wait
for i in $(seq 0 $((n - 1))); do cat "$TMPDIR/inventory.$i"; done
IFS=:
for entry in $PATH; do
  [ -z "$entry" ] || [ -d "$entry" ] || printf 'unseen\t%s\n' "$entry"
done
"""


@dataclass(frozen=True)
class Python:
    """A Python the shell finds by `name`: its version ('' when it does not run), and its
    pip's and pytest's (None: missing)."""

    name: str
    path: str
    real: str
    version: str
    pip: str | None
    pytest: str | None


@dataclass(frozen=True)
class Tool:
    """A tool the shell finds, with its version ('' when it gave none)."""

    name: str
    path: str
    version: str


@dataclass(frozen=True)
class Inventory:
    """What one survey found: the Pythons and tools on PATH, the names it did not find, and
    the PATH entries the host has that the sandbox does not show."""

    pythons: tuple[Python, ...] = ()
    tools: tuple[Tool, ...] = ()
    missing: tuple[str, ...] = ()
    unreachable: tuple[str, ...] = ()


def _checks() -> list[str]:
    """The survey's arguments: one `py NAME` or `tool NAME FLAG` per check."""
    return [f"py {name}" for name in PYTHONS] + [f"tool {name} {flag}" for name, flag in TOOLS]


def parse(output: str) -> Inventory:
    """The inventory in the survey's output (every PATH entry it did not see unreachable;
    `survey` keeps those the host has)."""
    pythons: list[Python] = []
    tools: list[Tool] = []
    missing: list[str] = []
    unseen: list[str] = []
    for line in output.splitlines():
        kind, *fields = line.split("\t")
        if kind == "python" and len(fields) == 6:
            name, path, real, version, pip, pytest = fields
            pythons.append(Python(name, path, real, _version(version), _found(pip), _found(pytest)))
        elif kind == "tool" and len(fields) == 3:
            tools.append(Tool(fields[0], fields[1], _version(fields[2])))
        elif kind == "missing" and len(fields) == 1:
            missing.append(fields[0])
        elif kind == "unseen" and len(fields) == 1:
            unseen.append(fields[0])
    return Inventory(tuple(pythons), tuple(tools), tuple(missing), tuple(unseen))


def _version(text: str) -> str:
    found = _VERSION.search(text)
    return found.group(0) if found else ""


def _found(text: str) -> str | None:
    return (_version(text) or "installed") if text else None


def describe(inventory: Inventory, *, network: Network, prepared: str | None = None) -> str:
    """A few lines for an agent's standing context: what its shell has and lacks, what on
    its PATH it cannot reach, and its network. `prepared`: what the repository's setup
    prepared (and whether it is complete), said first."""
    have = [*_pythons(inventory.pythons), *(_tool(tool) for tool in inventory.tools)]
    lines = [prepared] if prepared else []
    said = "Your shell has: " + (", ".join(have) if have else "none of the usual tools")
    lines.append(said + (f"; no {', '.join(inventory.missing)}." if inventory.missing else "."))
    if inventory.unreachable:
        lines.append(
            f"On your PATH but out of the sandbox's reach: {', '.join(inventory.unreachable)}."
        )
    if network.open:
        lines.append("The network is open.")
    elif network.hosts:
        lines.append(f"The network reaches {network.describe()}.")
    else:
        lines.append("There is no network: nothing missing can be installed.")
    return "\n".join(lines)


def _pythons(pythons: Sequence[Python]) -> list[str]:
    """Each Python once (`python3` and `python` are often one), with its pip and pytest."""
    said: list[str] = []
    for index, found in enumerate(pythons):
        if any(found.real == earlier.real for earlier in pythons[:index]):
            continue
        names = " and ".join(p.name for p in pythons if p.real == found.real)
        if not found.version:
            said.append(f"{names} ({found.path}, which does not run)")
            continue
        pip = f"pip {found.pip}" if found.pip else "no pip"
        pytest = f"pytest {found.pytest}" if found.pytest else "pytest missing"
        said.append(f"{names} {found.version} ({found.path}; {pip}; {pytest})")
    return said


def _tool(tool: Tool) -> str:
    return f"{tool.name} {tool.version}" if tool.version else f"{tool.name} (no version given)"


async def survey(
    sandbox: Sandbox,
    *,
    parent_env: Mapping[str, str],
    home: Path,
    prepared: Prepared | None = None,
) -> Inventory:
    """Run the survey once, as an agent's shell call runs, in an empty directory under
    `home` that the agents' user can read. Raises SandboxError when it cannot run."""
    scratch = await asyncio.to_thread(_scratch, home)
    try:
        done = await sandbox.run(
            _SCRIPT.replace("{checks}", " ".join(map(shlex.quote, _checks()))),
            place=Place(scratch, writable=False, prepared=prepared),
            env=agent_env(parent_env, sandbox=sandbox),
            timeout_s=_TIMEOUT_S,
            cap=20_000,
            network=NO_NETWORK,
        )
    finally:
        await asyncio.to_thread(shutil.rmtree, scratch, ignore_errors=True)
    if done.returncode != 0:
        end = done.output.text().strip()[-300:]
        raise SandboxError(f"the shell survey ended with exit code {done.returncode}: {end}")
    found = _in_worktree(parse(done.output.text()), scratch)
    return replace(found, unreachable=await asyncio.to_thread(_on_host, found.unreachable))


def _in_worktree(found: Inventory, scratch: Path) -> Inventory:
    """`found` with paths in the survey's directory relative to it: what the prepared
    environment put there is in every worktree, at the same place (`.venv/bin/python`)."""

    def seen(path: str) -> str:
        return path[len(f"{scratch}/") :] if path.startswith(f"{scratch}/") else path

    return replace(
        found,
        pythons=tuple(replace(p, path=seen(p.path), real=seen(p.real)) for p in found.pythons),
        tools=tuple(replace(tool, path=seen(tool.path)) for tool in found.tools),
    )


def _scratch(home: Path) -> Path:
    """An empty directory under `home` that any user may read (the agents' included)."""
    scratch = Path(tempfile.mkdtemp(prefix=".inventory-", dir=home))
    scratch.chmod(0o755)
    return scratch


def _on_host(paths: Sequence[str]) -> tuple[str, ...]:
    """Those of `paths` that are directories on the host."""
    return tuple(path for path in paths if os.path.isdir(path))


class Inventories:
    """Each survey once for the engine's lifetime: one per prepared environment (None: the
    host's, the same for every project without `setup:`). One that failed is tried again
    at the next ask."""

    def __init__(self, sandbox: Sandbox, *, parent_env: Mapping[str, str], home: Path) -> None:
        self.sandbox = sandbox
        self.parent_env = parent_env
        self.home = home
        self._found: dict[Prepared | None, Inventory] = {}
        self._lock = asyncio.Lock()

    async def of(self, prepared: Prepared | None = None) -> Inventory | None:
        """The inventory of a shell with `prepared` (None: when the survey failed, logged)."""
        async with self._lock:
            if prepared not in self._found:
                try:
                    self._found[prepared] = await survey(
                        self.sandbox, parent_env=self.parent_env, home=self.home, prepared=prepared
                    )
                except (OSError, SandboxError) as exc:
                    log.warning("agents are not told what their shell has: %s", exc)
                    return None
            return self._found[prepared]
