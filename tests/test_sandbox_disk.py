"""What a worktree holds on disk, and the bound TEAPARTY_SANDBOX_DISK_MB sets on it."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from orchestrator.core.errors import LimitError
from orchestrator.sandbox.disk import MB, DiskBound, usage


def test_usage_counts_each_file_once_by_its_length_or_blocks(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * MB)
    os.link(tmp_path / "a", tmp_path / "link-to-a")
    (tmp_path / "sub").mkdir()
    with open(tmp_path / "sub" / "sparse", "wb") as sparse:
        sparse.truncate(3 * MB)
    outside = tmp_path.parent / f"{tmp_path.name}-outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"y" * 5 * MB)
    (tmp_path / "to-outside").symlink_to(outside)
    used = usage([tmp_path])
    assert 4 * MB <= used < 4 * MB + 64 * 1024, "a, the sparse file's length, no link twice"


async def test_the_bound_says_how_much_room_is_left_and_stops_at_it(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"x" * 3 * MB)
    bound = DiskBound(4)
    room = await bound.room([tmp_path])
    assert 0 < room <= MB
    (tmp_path / "b").write_bytes(b"x" * MB)
    with pytest.raises(LimitError, match=r"reached 4\.0 MB of the 4 MB .*TEAPARTY_SANDBOX_DISK_MB"):
        await bound.room([tmp_path])
    note = await asyncio.wait_for(bound.watch([tmp_path]), timeout=30)
    assert note.startswith("disk: the task's files reached 4.0 MB")


async def test_the_watch_reads_past_a_directory_that_is_gone(tmp_path: Path) -> None:
    (tmp_path / "fill").write_bytes(b"x" * 4 * MB)
    note = await asyncio.wait_for(DiskBound(4).watch([tmp_path / "gone", tmp_path]), timeout=30)
    assert note.startswith("disk: the task's files reached 4.0 MB")
