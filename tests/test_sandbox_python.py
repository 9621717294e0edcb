"""The engine's own Python, which the sandbox mounts on purpose, runs in an agent's shell
under bubblewrap also where the host keeps it private: a root engine's pyenv build in /root
(mode 0700), with agents running as an unprivileged user. Before, `python` there was
`command not found` (exit 127). The parents bubblewrap makes for it are its own: nothing
else of the host's directory shows.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import confined

from orchestrator.sandbox.confine import Place, Sandbox
from orchestrator.workspace.shell import agent_env

ENGINE = Path(sys.base_prefix).resolve()


def private_ancestor(path: Path) -> Path | None:
    """The first directory above `path` that others may not search (None: all may)."""
    for folder in reversed(path.parents):
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder
    return None


@pytest.fixture
def bwrap(tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    if os.geteuid() != 0 or private_ancestor(ENGINE) is None:
        pytest.skip("needs a root engine whose Python lies under a private directory")
    yield from confined("bwrap", f"python-{tmp_path.name}")


async def run(sandbox: Sandbox, work: Path, command: str) -> tuple[int | None, list[str]]:
    env = agent_env({"PATH": f"{ENGINE}/bin:/usr/bin:/bin"}, sandbox=sandbox)
    done = await sandbox.run(
        command, place=Place(work, writable=True), env=env, timeout_s=60, cap=10_000
    )
    return done.returncode, done.output.text().split()


async def test_the_engines_python_runs_in_an_agents_shell(bwrap: tuple[Sandbox, Path]) -> None:
    sandbox, work = bwrap
    command = "id -u; python3 -c 'import sys; print(sys.base_prefix)'; python -c 'print(1)'"
    code, words = await run(sandbox, work, command)
    assert sandbox.run_as is not None
    assert words == [str(sandbox.run_as[0]), str(ENGINE), "1"]
    assert code == 0


async def test_its_parents_show_nothing_else_of_the_host(bwrap: tuple[Sandbox, Path]) -> None:
    top = private_ancestor(ENGINE)
    assert top is not None
    below = ENGINE.relative_to(top).parts
    folders = [top.joinpath(*below[:depth]) for depth in range(len(below))]
    code, words = await run(*bwrap, " && ".join(f"ls -A {folder}" for folder in folders))
    assert words == list(below)
    assert code == 0
