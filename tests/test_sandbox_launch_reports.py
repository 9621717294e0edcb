"""The Landlock launcher: what it reports, how it fails, and what it costs per call."""

from __future__ import annotations

import json
import os
import socket
import statistics
import subprocess
import sys
import time
from typing import Any

import pytest
from launch_support import (
    ABI,
    ENV,
    LAUNCHER,
    PROBE,
    PYTHON,
    SYSTEM,
    UID,
    Box,
    needs_python,
    needs_root,
    report,
    unconfined_probe,
)

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
def test_a_daemons_unix_socket_and_udp_are_out_of_reach(box: Box, listeners: list[int]) -> None:
    path = box.store / "daemon.sock"  # stands in for a docker or D-Bus socket
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    path.chmod(0o777)
    items = (f"unix:{path}", f"udp:{listeners[0]}")
    try:
        assert unconfined_probe(*items) == dict.fromkeys(items, "ok")
        assert box.probe(*items, tcp_connect=[]) == dict.fromkeys(items, "EACCES")
        # an open network lets UDP out, never the daemon's socket
        assert box.probe(*items) == {items[0]: "EACCES", items[1]: "ok"}
    finally:
        server.close()


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
    assert [line["udp"] for line in lines] == ["open", "off", "off"]
    assert {line["unix"] for line in lines} == {"kernel" if ABI >= 9 else "supervised"}
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
    ids=["as-itself", "bad-rlimit", "as-another"],  # stable names: UID differs per process
)
def test_an_engine_without_root_runs_commands_as_itself(
    box: Box, overrides: dict[str, Any], code: int, output: str
) -> None:
    cmd = box.command(["id", "-u"], **overrides)
    cmd[0] = PYTHON  # any python 3 runs the launcher: it is stdlib-only
    cmd[3] = box.launcher_anyone_reads()  # where the other uid can read it
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
