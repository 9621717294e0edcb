"""Files that are not files: an agent's FIFO, a socket or a device in its worktree is refused
by the file tools at once, under every sandbox mode, and nothing waits on it.

Before, `mkfifo p` then `read_file p` blocked the engine thread in open() for good (as did
write_file and edit_file), and enough such calls took every thread of the default pool.
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import confined

from orchestrator.core.messages import ToolCall
from orchestrator.sandbox.confine import Sandbox
from orchestrator.workspace.file_tools import WorktreeTools

GUARD_S = 30  # a refusal is immediate; this only turns a hang into a failure


@pytest.fixture(params=["bwrap", "landlock", "off"])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    yield from confined(request.param, f"special-{tmp_path.name}")


async def run(tools: WorktreeTools, name: str, **args: object) -> tuple[bool, str]:
    call = tools.run("coder", "job:1", ToolCall("c1", name, dict(args)))
    result = await asyncio.wait_for(call, GUARD_S)
    return result.is_error, result.output


async def test_an_agents_fifo_is_refused_at_once_by_every_file_tool(
    place: tuple[Sandbox, Path],
) -> None:
    sandbox, work = place
    tools = WorktreeTools(work, parent_env={"PATH": os.environ["PATH"]}, sandbox=sandbox)
    failed, said = await run(tools, "shell", command="mkfifo pipe && echo made")
    assert not failed, said
    assert "made" in said
    assert stat.S_ISFIFO(os.lstat(work / "pipe").st_mode)

    refusal = "'pipe' is a FIFO (named pipe); the file tools read and write regular files only"
    assert await run(tools, "read_file", path="pipe") == (True, refusal)
    assert await run(tools, "write_file", path="pipe", content="x") == (True, refusal)
    assert await run(tools, "edit_file", path="pipe", old="a", new="b") == (True, refusal)
    assert await run(tools, "search", pattern="x", path="pipe") == (True, refusal)
    failed, listing = await run(tools, "list_files")
    assert not failed
    assert "pipe" in listing.split()


async def test_many_hung_calls_would_take_the_default_pool_and_now_take_nothing(
    place: tuple[Sandbox, Path],
) -> None:
    """A dozen FIFO reads at once (the default pool has min(32, CPUs + 4) threads), then work
    the rest of the engine gives the default pool still runs."""
    sandbox, work = place
    os.mkfifo(work / "pipe")
    tools = WorktreeTools(work, parent_env={"PATH": os.environ["PATH"]}, sandbox=sandbox)
    calls = [run(tools, "read_file", path="pipe") for _ in range(12)]
    results = await asyncio.gather(*calls)
    assert all(failed for failed, _ in results)
    assert await asyncio.wait_for(asyncio.to_thread(lambda: "answered"), GUARD_S) == "answered"


async def test_sockets_and_devices_are_refused_too(tmp_path: Path, sandbox: Sandbox) -> None:
    work = tmp_path / "wt"
    work.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(work / "sock"))
    tools = WorktreeTools(work, parent_env={"PATH": os.environ["PATH"]}, sandbox=sandbox)
    try:
        failed, said = await run(tools, "read_file", path="sock")
        assert failed
        assert "'sock' is a socket" in said
        assert (await run(tools, "write_file", path="sock", content="x"))[0]
    finally:
        listener.close()
    if os.geteuid() != 0:
        pytest.skip("making a device file needs root")
    os.mknod(work / "null", stat.S_IFCHR | 0o666, os.makedev(1, 3))
    failed, said = await run(tools, "read_file", path="null")
    assert failed
    assert "'null' is a character device" in said
    assert (await run(tools, "write_file", path="null", content="x"))[0]
