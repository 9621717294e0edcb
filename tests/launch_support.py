"""The Landlock launcher's test machinery: probes, a confined box, process helpers (a pytest
plugin: the `box` and `listeners` fixtures)."""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from orchestrator.sandbox import launch as sandbox_launch

LAUNCHER = str(Path(sandbox_launch.__file__).resolve())
ABI = sandbox_launch.abi_version()
ROOT = os.geteuid() == 0
# A uid of our own, so RLIMIT_NPROC counts only this session's processes.
UID = 40000 + os.getpid() % 20000 if ROOT else None
SYSTEM = ["/usr", "/bin", "/lib", "/lib64", "/sbin", "/etc"]
DEVICES = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"]
PYTHON = "/usr/bin/python3"  # the venv's python may sit where the dropped uid cannot look
ENV = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "CANARY": "launcher-env"}

pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="Landlock is Linux-only"),
    pytest.mark.skipif(ABI == 0, reason="this kernel has no Landlock"),
]
needs_root = pytest.mark.skipif(not ROOT, reason="dropping to a uid needs root")
needs_python = pytest.mark.skipif(
    not os.access(PYTHON, os.X_OK), reason=f"{PYTHON} (a python any uid can run) is missing"
)

# Runs inside the sandbox: tries each "op:arg" and prints {item: "ok" | errno name}.
PROBE = r"""
import errno, json, os, socket, sys

def sibling_environ():
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(r, 1)
        os._exit(0)
    try:
        open(f"/proc/{pid}/environ", "rb").read()
    finally:
        os.write(w, b"x")
        os.waitpid(pid, 0)

def attempt(op, arg):
    arg = arg.replace("{ppid}", str(os.getppid()))
    if op == "read":
        open(arg, "rb").read(1)
    elif op == "write":
        open(arg, "ab").close()
    elif op == "list":
        os.listdir(arg)
    elif op == "connect":
        socket.create_connection(("127.0.0.1", int(arg)), timeout=10).close()
    elif op == "bind":
        socket.socket().bind(("127.0.0.1", 0))
    elif op == "abstract":
        socket.socket(socket.AF_UNIX).connect("\0" + arg)
    elif op == "unix":
        socket.socket(socket.AF_UNIX).connect(arg)
    elif op == "udp":
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"x", ("127.0.0.1", int(arg)))
    elif op == "fastopen":  # a TCP connect inside a send
        socket.socket().sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", int(arg)))
    elif op == "io_uring":  # a ring's operations are not system calls a filter sees
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fd = libc.syscall(425, 8, ctypes.create_string_buffer(120))
        if fd < 0:
            raise OSError(ctypes.get_errno(), "io_uring_setup")
        os.close(fd)
    elif op == "shm":  # System V shared memory, which outlives the process that made it
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        shmid = libc.shmget(0, 4096, 0o1600)  # IPC_PRIVATE, IPC_CREAT | 0600
        if shmid < 0:
            raise OSError(ctypes.get_errno(), "shmget")
        libc.shmctl(shmid, 0, None)  # IPC_RMID
    elif op == "kill":
        os.kill(int(arg), 0)
    elif op == "setuid":
        os.setuid(0)
    elif op == "sibling":
        sibling_environ()

results = {}
for item in sys.argv[1:]:
    op, _, arg = item.partition(":")
    try:
        attempt(op, arg)
        results[item] = "ok"
    except OSError as exc:
        results[item] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(results))
"""


@dataclass
class Box:
    """Scratch dirs any uid can traverse: ro (read), rw (write) and store (not listed)."""

    base: Path
    uid: int | None = UID
    extra_read: list[str] = field(default_factory=list)

    @property
    def ro(self) -> Path:
        return self.base / "ro"

    @property
    def rw(self) -> Path:
        return self.base / "rw"

    @property
    def store(self) -> Path:
        return self.base / "store"

    def spec(self, argv: list[str], /, **overrides: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "argv": argv,
            "cwd": str(self.rw),
            "uid": self.uid,
            "gid": self.uid,
            "landlock": {
                "read": [*SYSTEM, str(self.ro), *self.extra_read],
                "write": [str(self.rw), *DEVICES],
                "tcp_connect": overrides.pop("tcp_connect", None),
            },
        }
        spec.update(overrides)
        return spec

    def command(self, argv: list[str], /, **overrides: Any) -> list[str]:
        return [sys.executable, "-I", "-S", LAUNCHER, json.dumps(self.spec(argv, **overrides))]

    def launcher_anyone_reads(self) -> str:
        """A copy of the launcher and the module beside it (both stdlib-only) that every uid
        can read, in a directory it can list (Python's import lists it): the checkout's own
        may lie where another uid cannot look (a clone in a 0700 directory, under /root)."""
        folder = self.base / "launcher"
        folder.mkdir(mode=0o755, exist_ok=True)
        folder.chmod(0o755)
        for name in ("launch.py", "sockguard.py"):
            shutil.copyfile(Path(LAUNCHER).with_name(name), folder / name)
            (folder / name).chmod(0o644)
        return str(folder / "launch.py")

    def run(self, argv: list[str], /, **overrides: Any) -> subprocess.CompletedProcess[str]:
        cmd = self.command(argv, **overrides)
        return subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=60)

    def probe(self, *items: str, **overrides: Any) -> dict[str, str]:
        done = self.run([PYTHON, "-I", "-S", "-c", PROBE, *items], **overrides)
        assert done.returncode == 0, done.stderr
        result: dict[str, str] = json.loads(done.stdout)
        return result


@pytest.fixture
def box() -> Iterator[Box]:
    base = Path(tempfile.mkdtemp(dir="/tmp", prefix="teaparty-landlock-"))
    try:
        base.chmod(0o711)
        for name in ("ro", "rw", "store"):
            (base / name).mkdir(mode=0o777)
            (base / name).chmod(0o777)  # only Landlock, never the mode bits, may refuse
            (base / name / "f").write_text(f"{name} file\n")
            (base / name / "f").chmod(0o666)
        if UID is not None:
            os.chown(base / "rw", UID, UID)
        yield Box(base)
    finally:
        shutil.rmtree(base)


def unconfined_probe(*items: str, uid: int | None = UID) -> dict[str, str]:
    """The same probe outside the sandbox (as the same uid): shows each attack works there."""
    cmd = [PYTHON, "-I", "-S", "-c", PROBE, *items]
    done = subprocess.run(
        cmd, capture_output=True, text=True, env=ENV, user=uid, group=uid, timeout=60
    )
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


def wait_gone(pids: list[int], timeout: float = 10) -> list[int]:
    """Wait (on pidfds, no polling) until the pids have exited; return those still alive."""
    fds = {}
    for pid in pids:
        try:
            fds[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            continue
    try:
        deadline = time.monotonic() + timeout
        for fd in fds.values():
            select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        return [pid for pid, fd in fds.items() if not select.select([fd], [], [], 0)[0]]
    finally:
        for fd in fds.values():
            os.close(fd)


def report(capsys: pytest.CaptureFixture[str], text: str) -> None:
    """Show a measured figure in the test output, even when output is captured."""
    with capsys.disabled():
        sys.stdout.write(f"\n[sandbox_launch] {text}\n")


# Starts a setsid daemon and a double-forked one, then says "ready <pids>" once both run.
SPAWN = (
    "setsid sh -c 'echo $$ > a; exec sleep 300' & "
    "(sh -c 'echo $$ > b; exec sleep 301' &); "
    "while [ ! -s a ] || [ ! -s b ]; do :; done; "
    'echo "ready $$ $(cat a) $(cat b)"; '
)


@pytest.fixture
def listeners() -> Iterator[list[int]]:
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    try:
        yield [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()
