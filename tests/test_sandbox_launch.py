"""The Landlock launcher on real processes: file and network rules, scopes, limits, uid, cleanup."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import statistics
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


@pytest.fixture
def listeners() -> Iterator[list[int]]:
    socks = [socket.create_server(("127.0.0.1", 0)) for _ in range(2)]
    try:
        yield [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


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


PROC_FILES = ("environ", "maps", "cmdline")
# Confines itself with the module's own ruleset, then execs argv[3:]: the launcher refuses
# to run a command as root, so this is how the root case gets measured.
CONFINED_AS_ROOT = (
    "import os, sys\n"
    "sys.path.insert(0, os.path.dirname(sys.argv[1]))\n"
    "import launch\n"
    "policy = launch.Policy(sys.argv[2].split(':'), ['/dev/null'], None)\n"
    "launch.enforce(launch.build_ruleset(policy, launch.abi_version()))\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)


def confined_as_root_probe(read: list[str], *items: str) -> dict[str, str]:
    probe = [PYTHON, "-I", "-S", "-c", PROBE, *items]
    cmd = [sys.executable, "-I", "-S", "-c", CONFINED_AS_ROOT, LAUNCHER, ":".join(read), *probe]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=60)
    assert done.returncode == 0, done.stderr
    result: dict[str, str] = json.loads(done.stdout)
    return result


@needs_root
@needs_python
def test_report_what_proc_shows_of_processes_outside(
    box: Box, capsys: pytest.CaptureFixture[str]
) -> None:
    engine = os.getpid()  # the launcher's parent stands in for a root engine
    peer = subprocess.Popen(["sleep", "300"], user=UID, group=UID, env={"CANARY": "peer"})
    targets = {"engine": str(engine), "launcher": "{ppid}", "same-uid peer": str(peer.pid)}
    items = [f"read:/proc/{pid}/{name}" for pid in targets.values() for name in PROC_FILES]
    box.extra_read.append("/proc")
    try:
        runs = {
            f"unconfined uid {UID}": unconfined_probe(*items, "sibling:"),
            f"landlocked uid {UID}": box.probe(*items, "sibling:"),
            "unconfined root": unconfined_probe(*items, "sibling:", uid=None),
            "landlocked root": confined_as_root_probe([*SYSTEM, "/proc"], *items, "sibling:"),
        }
    finally:
        peer.kill()
        peer.wait()
    assert set(runs["unconfined root"].values()) == {"ok"}  # the probe can read them all
    for mode, got in runs.items():
        shown = [
            f"{target} "
            + " ".join(f"{name}={got[f'read:/proc/{pid}/{name}']}" for name in PROC_FILES)
            for target, pid in targets.items()
        ]
        report(capsys, f"{mode}: {'; '.join(shown)}; own child environ={got['sibling:']}")


@needs_python
def test_report_what_landlock_leaves_open(
    box: Box, listeners: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    path = box.store / "daemon.sock"  # stands in for a docker or D-Bus socket
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    path.chmod(0o777)
    try:
        assert unconfined_probe(f"unix:{path}") == {f"unix:{path}": "ok"}
        got = box.probe(f"unix:{path}", f"udp:{listeners[0]}", tcp_connect=[])
    finally:
        server.close()
    report(capsys, f"with tcp_connect=[] and the socket's dir unlisted: {got}")


def test_status_line_says_which_restrictions_held(box: Box) -> None:
    lines = []
    for ports in (None, [], [1]):
        read_end, write_end = os.pipe()
        cmd = box.command(["true"], tcp_connect=ports, status_fd=write_end, parent_pid=os.getpid())
        done = subprocess.run(cmd, pass_fds=(write_end,), env=ENV, timeout=60)
        os.close(write_end)
        with os.fdopen(read_end) as status:
            lines.append(json.loads(status.read()))
        assert done.returncode == 0
    modes = ["open", "off", "ports"] if ABI >= 4 else ["open", "unenforced", "unenforced"]
    assert [line["net"] for line in lines] == modes
    assert {(line["abi"], line["fs"], line["scopes"], line["uid"]) for line in lines} == {
        (ABI, True, ABI >= 6, UID if UID is not None else os.geteuid())
    }


@pytest.mark.parametrize(
    ("argv", "overrides", "code", "reason"),
    [
        (["no-such-command"], {}, 127, "no-such-command: command not found"),
        (["/etc/hostname"], {}, 126, "/etc/hostname: "),
        (["true"], {"uid": 0, "gid": 0}, 125, "uid must be an integer in [1, "),
        (["true"], {"argv": []}, 125, "argv is empty"),
        (["true"], {"landlock": {"rd": []}}, 125, "landlock must be an object"),
        (["true"], {"rlimits": {"NOPE": 1}}, 125, "unknown rlimit 'NOPE'"),
        (["true"], {"tcp_connect": [0]}, 125, "port must be an integer in [1, 65535]"),
        (["true"], {"parent_pid": 1}, 125, "the engine died before the launcher started"),
        pytest.param(
            ["true"],
            {"uid": None, "gid": None},
            125,
            "refusing to run the command as root",
            marks=needs_root,
        ),
    ],
)
def test_launcher_failures_are_one_line_and_a_shell_like_code(
    box: Box, argv: list[str], overrides: dict[str, Any], code: int, reason: str
) -> None:
    done = box.run(argv, **overrides)
    assert done.returncode == code
    assert done.stderr.startswith(f"teaparty-sandbox: {reason}")
    assert done.stderr.count("\n") == 1


@needs_root
@needs_python
@pytest.mark.parametrize(
    ("overrides", "code", "output"),
    [
        ({"uid": None, "gid": None}, 0, f"{UID}\n"),
        (
            {"uid": None, "gid": None, "rlimits": {"NOFILE": 2**40}},
            125,
            "teaparty-sandbox: rlimits",
        ),
        ({}, 125, f"teaparty-sandbox: cannot switch to uid {UID}: Operation not permitted"),
    ],
)
def test_an_engine_without_root_runs_commands_as_itself(
    box: Box, overrides: dict[str, Any], code: int, output: str
) -> None:
    cmd = box.command(["id", "-u"], **overrides)
    cmd[0] = PYTHON  # any python 3 runs the launcher: it is stdlib-only
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, user=UID, group=UID)
    assert done.returncode == code
    assert (done.stdout or done.stderr).startswith(output)


def test_malformed_spec_json_is_a_launch_failure() -> None:
    cmd = [sys.executable, "-I", "-S", LAUNCHER, "{not json"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert done.returncode == 125
    assert done.stderr.startswith("teaparty-sandbox: spec is not JSON")


def test_report_added_cost_per_call(box: Box, capsys: pytest.CaptureFixture[str]) -> None:
    def median_ms(cmd: list[str]) -> float:
        times = []
        for _ in range(50):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, env=ENV)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    plain = median_ms(["true"])
    confined = median_ms(box.command(["true"]))
    report(capsys, f"true: {plain:.1f} ms plain, {confined:.1f} ms via the launcher")
