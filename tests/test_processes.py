"""Child processes: each descriptor is closed once, also under uvloop (teaparty serve's loop).

A pipe read end closed twice closes whatever reused its number in between: at `teaparty
serve` start, the sandbox probe's call ran just before the store opened, and SQLite's
file was closed under it ("disk I/O error", a few starts in a hundred). This repeats that
start many times; against the old code it failed in most runs. The code now owns its pipe
outright (opened and closed once, read with the loop's reader callbacks).
"""

from __future__ import annotations

from pathlib import Path

import uvloop

from orchestrator.sandbox.probe import probe
from orchestrator.store.sqlite import Store


def test_the_probe_never_closes_the_store_under_uvloop(tmp_path: Path) -> None:
    async def main() -> None:
        for n in range(120):
            home = tmp_path / str(n)
            await probe({}, home=home)
            store = await Store.open(home / "teaparty.db")  # "disk I/O error" when it raced
            await store.close()

    uvloop.run(main())
