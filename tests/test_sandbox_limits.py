"""Resource limits per call, under every sandbox this host gives: a call that hits one says so."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import confined

from orchestrator.sandbox.confine import Limits, Place, Sandbox
from orchestrator.workspace.shell import agent_env

SMALL = Limits(processes=40, file_mb=1, memory_mb=200, open_files=64)


@pytest.fixture(params=["bwrap", "landlock"])
def small(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    for found, work in confined(request.param, f"limits-{tmp_path.name}"):
        yield replace(found, limits=SMALL), work


async def run(sandbox: Sandbox, work: Path, command: str) -> tuple[int | None, str, str]:
    env = agent_env({"PATH": "/usr/bin:/bin"}, sandbox=sandbox)
    done = await sandbox.run(
        command, place=Place(work, writable=True), env=env, timeout_s=20, cap=20_000
    )
    return done.returncode, done.output.text(), sandbox.explain(done)


async def test_a_file_past_the_size_limit_stops_with_a_note(small: tuple[Sandbox, Path]) -> None:
    code, _, note = await run(*small, "head -c 3000000 /dev/zero > big")
    assert code == 128 + 25
    assert note == "[sandbox: a file reached the size limit of 1 MB (SIGXFSZ)]"


async def test_memory_past_the_limit_fails_with_a_note(small: tuple[Sandbox, Path]) -> None:
    code, output, note = await run(*small, "python3 -c 'x = bytearray(400 * 1024 * 1024)'")
    assert code != 0
    assert "MemoryError" in output
    assert note == "[sandbox limits per call: memory: 200 MB of data per process]"


async def test_a_fork_loop_is_bounded_with_a_note(small: tuple[Sandbox, Path]) -> None:
    _, _, note = await run(*small, "for i in $(seq 100); do sleep 1 & done; wait")
    assert "processes: at most 40 at once" in note


async def test_the_agent_cannot_raise_its_limits(small: tuple[Sandbox, Path]) -> None:
    code, output, _ = await run(*small, "ulimit -f 100000 && echo raised")
    assert "raised" not in output
    assert code != 0
