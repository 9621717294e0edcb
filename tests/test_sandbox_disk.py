"""What a worktree holds on disk, and the bound TEAPARTY_SANDBOX_DISK_MB sets on it."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from reachable import reachable_code

from orchestrator.core.errors import LimitError
from orchestrator.sandbox.disk import INODE_BYTES, MB, DiskBound, usage


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


def usage_as_owner(work: Path) -> int:
    """`usage([work])` as run by the owner of `work`'s files, not root (whom no permission
    stops): a non-root engine measures worktrees its agents, running as its uid, made."""
    if os.geteuid() != 0:
        return usage([work])
    python = Path("/usr/bin") / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    if not python.exists():
        pytest.skip(f"no {python} for an unprivileged user to run")
    uid = 3_200_000 + os.getpid() % 10_000
    for folder, dirs, files in os.walk(work):
        for name in [*dirs, *files, ""]:
            os.lchown(os.path.join(folder, name), uid, uid)
    code = (
        "import sys; sys.path.insert(0, sys.argv[2]); "
        "from orchestrator.sandbox.disk import usage; print(usage([sys.argv[1]]))"
    )
    top = Path(tempfile.mkdtemp(prefix="teaparty-code-"))  # the checkout may be root's alone
    try:
        os.chmod(top, 0o711)
        engine = reachable_code(top / "engine", "orchestrator")
        done = subprocess.run(
            ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", str(python), "-I"]
            + ["-c", code, str(work), str(engine)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        shutil.rmtree(top)
    assert done.returncode == 0, done.stderr
    return int(done.stdout)


@pytest.mark.parametrize("mode", [0o000, 0o300, 0o600], ids=["none", "no-read", "no-search"])
def test_a_folder_its_agent_closed_is_opened_up_and_measured(mode: int) -> None:
    """An agent running as the engine's uid may `chmod` a folder of its worktree shut; the
    measure opens it to its owner rather than failing (a crash would fail the whole job)."""
    work = Path(tempfile.mkdtemp(prefix="teaparty-disk-"))
    try:
        (work / "shut").mkdir()
        (work / "shut" / "big").write_bytes(b"x" * 2 * MB)
        os.chmod(work / "shut", mode)
        assert 2 * MB <= usage_as_owner(work) < 3 * MB
    finally:
        os.chmod(work / "shut", 0o700)
        shutil.rmtree(work)


def test_empty_files_count_too(tmp_path: Path) -> None:
    """An empty file holds no block, but an inode: without a least count per file, a task
    could make millions (the host's inodes) under any bound."""
    for number in range(1024):
        (tmp_path / f"empty-{number}").touch()
    assert usage([tmp_path]) >= 1024 * INODE_BYTES


def test_a_tree_too_deep_to_measure_stops_the_task_not_the_job(tmp_path: Path) -> None:
    """A path past PATH_MAX cannot be opened by name; an OSError here would fail the job.
    (Long names, not many levels: pytest's and shutil's removal recurse once a level.)"""
    name = "d" * 250
    folder = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(20):  # 20 * 251 > PATH_MAX (4096)
            os.mkdir(name, dir_fd=folder)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=folder)
            os.close(folder)
            folder = inner
    finally:
        os.close(folder)
    with pytest.raises(LimitError, match=r"cannot be measured \(File name too long: '\.\.\.d"):
        usage([tmp_path])
