"""The Landlock launcher on real processes: file and network rules, scopes, limits, uid, cleanup."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from launch_support import (
    ABI,
    ENV,
    PYTHON,
    SPAWN,
    UID,
    Box,
    needs_python,
    needs_root,
    unconfined_probe,
    wait_gone,
)


def test_fs_rules_allow_listed_paths_and_deny_the_rest(box: Box) -> None:
    (box.store / "single").write_text("")
    (box.store / "single").chmod(0o666)
    box.extra_read.append("/nonexistent/is/skipped")
    items = [
        f"read:{box.ro}/f",
        f"list:{box.ro}",
        f"write:{box.rw}/new",
        "write:/dev/null",
        f"write:{box.ro}/f",
        f"write:{box.ro}/new",
        f"read:{box.store}/f",
        f"write:{box.store}/new",
        f"list:{box.store}",
        f"write:{box.store}/single",
    ]
    assert set(unconfined_probe(*items).values()) == {"ok"}  # mode bits allow all of it
    spec_write = [str(box.rw), "/dev/null", str(box.store / "single")]
    spec = box.spec([])
    spec["landlock"]["write"] = spec_write
    got = box.probe(*items, landlock=spec["landlock"])
    assert got == dict.fromkeys(items[:4], "ok") | dict.fromkeys(items[4:9], "EACCES") | {
        items[9]: "ok"  # a rule on a single file, with its dir-only rights masked off
    }


def test_setsid_and_double_forked_daemons_die_with_the_call(box: Box) -> None:
    done = box.run(["sh", "-c", SPAWN + "exit 3"])
    assert done.returncode == 3, done.stderr
    words = done.stdout.split()
    assert words[0] == "ready"
    pids = [int(word) for word in words[2:]]
    assert len(pids) == 2
    assert not [pid for pid in pids if Path(f"/proc/{pid}").exists()]


def test_sigterm_to_the_launcher_kills_the_whole_tree(box: Box) -> None:
    cmd = box.command(["sh", "-c", SPAWN + "exec sleep 302"])
    launcher = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=ENV)
    assert launcher.stdout is not None
    words = launcher.stdout.readline().split()
    assert words[0] == "ready"
    tree = [int(word) for word in words[1:]]  # the command itself and both daemons
    launcher.send_signal(signal.SIGTERM)
    assert launcher.wait(timeout=30) == 128 + signal.SIGTERM
    launcher.stdout.close()
    assert not [pid for pid in tree if Path(f"/proc/{pid}").exists()]


def test_the_engine_dying_kills_launcher_and_tree(box: Box) -> None:
    engine_code = "import subprocess, sys, time; subprocess.Popen(sys.argv[1:]); time.sleep(600)"
    cmd = box.command(["sh", "-c", SPAWN.replace("ready $$", "ready $PPID $$") + "sleep 303"])
    engine = subprocess.Popen(
        [sys.executable, "-c", engine_code, *cmd], stdout=subprocess.PIPE, text=True, env=ENV
    )
    assert engine.stdout is not None
    words = engine.stdout.readline().split()
    assert words[0] == "ready"
    everyone = [int(word) for word in words[1:]]  # launcher, command, two daemons
    engine.kill()
    engine.wait()
    engine.stdout.close()
    assert wait_gone(everyone) == []


@needs_root
@needs_python
def test_nproc_bounds_a_fork_loop(box: Box) -> None:
    fork_loop = (
        "import os\nn = 0\nwhile n < 50:\n    try:\n        pid = os.fork()\n"
        "    except OSError as exc:\n        print(n, exc.errno)\n        break\n"
        "    if pid == 0:\n        os.pause()\n    n += 1\nelse:\n    print(n, 0)\n"
    )
    done = box.run([PYTHON, "-I", "-S", "-c", fork_loop], rlimits={"NPROC": 8})
    forked, errno_seen = map(int, done.stdout.split())
    assert 0 < forked < 8
    assert errno_seen == 11  # EAGAIN


def test_fsize_kills_with_sigxfsz(box: Box) -> None:
    argv = ["dd", "if=/dev/zero", f"of={box.rw}/big", "bs=64k", "count=4"]
    done = box.run(argv, rlimits={"FSIZE": 4096})
    assert done.returncode == 128 + signal.SIGXFSZ, done.stderr
    assert (box.rw / "big").stat().st_size <= 4096


def test_cpu_limit_kills_with_sigxcpu(box: Box) -> None:
    done = box.run(["sh", "-c", "while :; do :; done"], rlimits={"CPU": 1, "CORE": 0})
    assert done.returncode == 128 + signal.SIGXCPU


@needs_root
@needs_python
def test_runs_as_the_given_uid_and_cannot_regain_root(box: Box) -> None:
    done = box.run(["sh", "-c", "id -u; id -G"])
    assert done.stdout.split() == [str(UID), str(UID)]
    box.extra_read.append("/proc")
    status = box.run(["grep", "-E", "^(CapEff|CapPrm|NoNewPrivs)", "/proc/self/status"])
    assert status.stdout.split() == ["CapPrm:", "0" * 16, "CapEff:", "0" * 16, "NoNewPrivs:", "1"]
    assert box.probe("setuid:") == {"setuid:": "EPERM"}


@needs_root
def test_a_setuid_root_binary_gives_no_root(box: Box) -> None:
    setuid_id = box.ro / "id"
    shutil.copy("/usr/bin/id", setuid_id)
    setuid_id.chmod(0o4755)
    plain = subprocess.run([setuid_id, "-u"], capture_output=True, text=True, user=UID, group=UID)
    assert plain.stdout.strip() == "0"  # without the launcher the bit works on this mount
    assert box.run([str(setuid_id), "-u"]).stdout.strip() == str(UID)


@needs_python
@pytest.mark.skipif(ABI < 4, reason="Landlock restricts TCP only from ABI 4")
def test_tcp_connect_only_to_listed_ports(box: Box, listeners: list[int]) -> None:
    first, second = (f"connect:{port}" for port in listeners)
    assert box.probe(first, second, "bind:") == {first: "ok", second: "ok", "bind:": "ok"}
    assert box.probe(first, second, "bind:", tcp_connect=[]) == dict.fromkeys(
        (first, second, "bind:"), "EACCES"
    )
    assert box.probe(first, second, "bind:", tcp_connect=[listeners[0]]) == {
        first: "ok",
        second: "EACCES",
        "bind:": "EACCES",
    }


@needs_python
def test_no_connect_hides_in_a_send_or_a_ring(box: Box, listeners: list[int]) -> None:
    items = (f"fastopen:{listeners[0]}", "io_uring:")
    outside = unconfined_probe(*items)
    assert outside[items[0]] == "ok"
    assert box.probe(*items, tcp_connect=[]) == {items[0]: "EACCES", items[1]: "ENOSYS"}
    if outside[items[1]] != "ok":
        pytest.skip(f"io_uring is off on this host ({outside[items[1]]}): refused either way")


@needs_python
def test_system_v_ipc_is_refused(box: Box) -> None:
    """Without an IPC namespace a segment would outlive the call and reach the next
    worktree given the same uid."""
    assert unconfined_probe("shm:") == {"shm:": "ok"}
    assert box.probe("shm:", tcp_connect=[]) == {"shm:": "ENOSYS"}
    assert box.probe("shm:") == {"shm:": "ENOSYS"}  # with the network open too


@needs_python
@pytest.mark.skipif(ABI < 6, reason="Landlock scopes signals and abstract sockets from ABI 6")
def test_scopes_block_signals_and_abstract_sockets_outside_the_domain(box: Box) -> None:
    name = f"teaparty-test-{os.getpid()}"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind("\0" + name)
    listener.listen()
    outsider = subprocess.Popen(["sleep", "300"], user=UID, group=UID)
    try:
        items = (f"kill:{outsider.pid}", f"abstract:{name}")
        assert set(unconfined_probe(*items).values()) == {"ok"}
        assert box.probe(*items) == dict.fromkeys(items, "EPERM")
    finally:
        outsider.kill()
        outsider.wait()
        listener.close()


ODD_CONNECTS = r"""
import ctypes, errno, json, os, socket
libc = ctypes.CDLL(None, use_errno=True)

def connect(fd, address, length):
    if libc.connect(fd, address, length) == 0:
        return "ok"
    return errno.errorcode[ctypes.get_errno()]

unix = socket.socket(socket.AF_UNIX)
path = lambda p: ctypes.create_string_buffer(b"\x01\x00" + p + b"\x00")
read_end, _ = os.pipe()
print(json.dumps({
    "not a socket": connect(read_end, path(b"x"), 10),
    "closed fd": connect(999, path(b"x"), 10),
    "address too long": connect(unix.fileno(), path(b"x"), 200),
    "address unreadable": connect(unix.fileno(), ctypes.c_void_p(8), 16),
    "up and out": connect(unix.fileno(), path(b"../store/s"), 14),
    "missing": connect(unix.fileno(), path(b"nothing-here"), 16),
    "a file": connect(unix.fileno(), path(b"f"), 5),
}))
"""


@needs_python
def test_the_launcher_answers_odd_connects_as_the_kernel_would(box: Box) -> None:
    done = box.run([PYTHON, "-I", "-S", "-c", ODD_CONNECTS])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "not a socket": "ENOTSOCK",
        "closed fd": "EBADF",
        "address too long": "EINVAL",
        "address unreadable": "EFAULT",
        "up and out": "EACCES",
        "missing": "ENOENT",
        "a file": "ECONNREFUSED",
    }
