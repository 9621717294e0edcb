"""Resource limits per call, under every sandbox this host gives: a call that hits one says so;
the disk bound of a writable worktree holds before, while and after a call runs."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import confined
from reachable import reachable_code

from orchestrator.core.errors import LimitError
from orchestrator.sandbox.confine import Limits, Place, Sandbox
from orchestrator.sandbox.processes import Finished
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
    assert note == (
        "[sandbox: a file reached the size limit of 1 MB, or the disk left to the task (SIGXFSZ)]"
    )


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


DISK = replace(SMALL, file_mb=64, disk_mb=8)
ENDLESS = "i=0; while :; do head -c 1048576 /dev/zero > {where}/f$i || exit; i=$((i+1)); done"


async def _fill(sandbox: Sandbox, work: Path, where: str) -> Finished:
    """A call under the DISK limits that writes 1 MiB files into `where` until it fails."""
    return await replace(sandbox, limits=DISK).run(
        ENDLESS.format(where=where),
        place=Place(work, writable=True),
        env=agent_env({"PATH": "/usr/bin:/bin"}, sandbox=sandbox),
        timeout_s=60,
        cap=2000,
    )


async def test_a_call_that_fills_its_worktree_is_stopped_while_it_runs(
    small: tuple[Sandbox, Path],
) -> None:
    sandbox, work = small
    done = await _fill(sandbox, work, ".")
    assert done.returncode is None
    assert done.stopped is not None
    assert done.stopped.startswith("disk: the task's files reached")


async def test_one_file_grows_no_further_than_the_disk_left(small: tuple[Sandbox, Path]) -> None:
    sandbox, work = small
    (work / "there").write_bytes(b"x" * 3 * 1024 * 1024)
    code, _, note = await run(
        replace(sandbox, limits=DISK), work, "head -c 20000000 /dev/zero > big"
    )
    assert code == 128 + 25, note
    assert (work / "big").stat().st_size <= 5 * 1024 * 1024


async def test_nothing_starts_in_a_worktree_over_its_bound(small: tuple[Sandbox, Path]) -> None:
    sandbox, work = small
    (work / "there").write_bytes(b"x" * 8 * 1024 * 1024)
    with pytest.raises(LimitError, match=r"reached 8\.0 MB of the 8 MB"):
        await run(replace(sandbox, limits=DISK), work, "touch ran")
    assert not (work / "ran").exists()


async def test_a_calls_temporary_files_are_bounded_too(small: tuple[Sandbox, Path]) -> None:
    """bubblewrap's /tmp is a tmpfs no larger than the disk left; Landlock's temporary
    directory is on the host's disk, watched with the worktree."""
    sandbox, work = small
    done = await _fill(sandbox, work, '"$TMPDIR"')
    if sandbox.mode == "bwrap":
        assert done.returncode == 1
        assert "No space left on device" in done.output.text()
    else:
        assert done.stopped is not None


@pytest.fixture
def unconfined(tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    for found, work in confined("off", f"limits-off-{tmp_path.name}"):
        yield replace(found, limits=DISK), work


async def test_off_gives_a_call_its_own_temporary_directory(
    unconfined: tuple[Sandbox, Path],
) -> None:
    """Unconfined calls still write temporary files where the disk bound sees them and where
    they are removed after the call, not into the host's /tmp."""
    sandbox, work = unconfined
    done = await sandbox.run(
        'echo "$TMPDIR" > where && ' + ENDLESS.format(where='"$TMPDIR"'),
        place=Place(work, writable=True),
        env=agent_env({"PATH": "/usr/bin:/bin"}, sandbox=sandbox),
        timeout_s=60,
        cap=2000,
    )
    scratch = Path((work / "where").read_text().strip())
    assert scratch.name.startswith("teaparty-call-")
    assert not await asyncio.to_thread(scratch.exists)
    assert done.stopped is not None


def test_a_calls_temporary_files_go_with_it_even_shut() -> None:
    """A non-root engine's agents run as its uid and may shut a folder of their temporary
    directory; what it holds still goes when the call ends, or it would stay on the host's
    disk outside every bound. Run as a non-root engine (a child dropped from root, if root
    runs the test), under `off`, whose temporary directory is the engine's as Landlock's is."""
    shut = "mkdir -p $TMPDIR/a/b && head -c 100000 /dev/zero > $TMPDIR/a/b/f && chmod 500 $TMPDIR/a"
    code = (
        "import asyncio, sys; sys.path.insert(0, sys.argv[1]); from pathlib import Path; "
        "from orchestrator.sandbox.confine import Place, Sandbox; "
        "done = asyncio.run(Sandbox('off', 't').run(sys.argv[2] + ' && echo $TMPDIR && "
        "chmod 500 $TMPDIR', place=Place(Path(sys.argv[3]), writable=True), "
        "env={'PATH': '/usr/bin:/bin'}, timeout_s=30, cap=4000)); "
        "print(done.output.text())"
    )
    work = Path(tempfile.mkdtemp(prefix="teaparty-shut-"))
    top = Path(tempfile.mkdtemp(prefix="teaparty-code-"))  # the checkout may be root's alone
    try:
        os.chmod(top, 0o711)
        engine = reachable_code(top / "engine", "orchestrator")
        argv = [sys.executable, "-I", "-c", code, str(engine), shut, str(work)]
        if os.geteuid() == 0:
            python = Path("/usr/bin") / f"python{sys.version_info[0]}.{sys.version_info[1]}"
            if not python.exists():
                pytest.skip(f"no {python} for an unprivileged user to run")
            uid = 3_300_000 + os.getpid() % 10_000
            os.chown(work, uid, uid)
            drop = [f"--reuid={uid}", f"--regid={uid}", "--clear-groups"]
            argv = ["setpriv", *drop, str(python), *argv[1:]]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        scratch = Path(done.stdout.split()[0])
        assert scratch.name.startswith("teaparty-call-"), done.stdout
        assert not scratch.exists(), "the call's temporary directory stayed"
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(work.parent / f".home-{work.name}", ignore_errors=True)  # off's HOME
        shutil.rmtree(top, ignore_errors=True)


async def test_posix_shared_memory_is_the_calls_own_under_bubblewrap(
    small: tuple[Sandbox, Path],
) -> None:
    """multiprocessing's locks live in /dev/shm: bubblewrap gives each call a small one of
    its own; Landlock keeps the host's shared /dev/shm out of reach (SECURITY.md)."""
    sandbox, work = small
    lock = "python3 -c 'import multiprocessing; multiprocessing.Lock(); print(\"locked\")'"
    code, output, _ = await run(sandbox, work, lock)
    if sandbox.mode == "landlock":
        assert "PermissionError" in output
        return
    assert (code, output.strip()) == (0, "locked")
    fill = "for i in $(seq 70); do head -c 1000000 /dev/zero > /dev/shm/f$i || exit 1; done"
    code, output, _ = await run(sandbox, work, fill)  # 70 MB, in files below the size limit
    assert code != 0
    assert "No space left on device" in output
