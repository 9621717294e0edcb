"""Child processes: each descriptor is closed once, also under uvloop (teaparty serve's loop);
a watch beside the command stops it.

A pipe read end closed twice closes whatever reused its number in between: at `teaparty
serve` start, the sandbox probe's call ran just before the store opened, and SQLite's
file was closed under it ("disk I/O error", a few starts in a hundred). This repeats that
start many times; against the old code it failed in most runs. The code now owns its pipe
outright (opened and closed once, read with the loop's reader callbacks).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import uvloop

from orchestrator.core.errors import LimitError
from orchestrator.sandbox.probe import probe
from orchestrator.sandbox.processes import run_process
from orchestrator.store.sqlite import Store


def test_the_probe_never_closes_the_store_under_uvloop(tmp_path: Path) -> None:
    async def main() -> None:
        for n in range(120):
            home = tmp_path / str(n)
            await probe({}, home=home)
            store = await Store.open(home / "teaparty.db")  # "disk I/O error" when it raced
            await store.close()

    uvloop.run(main())


async def test_a_watch_that_ends_first_stops_the_command_and_says_why(tmp_path: Path) -> None:
    async def enough() -> str:
        return "enough"

    done = await run_process(
        ["sleep", "60"], cwd=tmp_path, env={}, timeout_s=60, cap=100, graceful=True, watch=enough()
    )
    assert (done.returncode, done.stopped) == (None, "enough")


async def test_a_command_that_ends_first_leaves_the_watch_behind(tmp_path: Path) -> None:
    async def never() -> str:
        await asyncio.Event().wait()
        return "unreachable"

    done = await run_process(["true"], cwd=tmp_path, env={}, timeout_s=60, cap=100, watch=never())
    assert (done.returncode, done.stopped) == (0, None)


async def test_a_watch_that_fails_fails_the_call_after_the_command_is_killed(
    tmp_path: Path,
) -> None:
    async def broken() -> str:
        raise LimitError("disk: cannot be measured")

    with pytest.raises(LimitError, match="cannot be measured"):
        await run_process(
            ["sleep", "60"], cwd=tmp_path, env={}, timeout_s=60, cap=100, watch=broken()
        )
