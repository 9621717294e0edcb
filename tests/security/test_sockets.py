"""Sockets an agent's shell must not reach: a host daemon's unix socket, and UDP out.

Through `Sandbox.run`, the path every agent's shell command takes. A root-owned socket
anyone may write (0777, as docker's and D-Bus's are reachable to their group) sits outside
the granted directories; a UDP listener on 127.0.0.1 counts what arrives. Each attack is
first shown to work unconfined (TEAPARTY_SANDBOX=off), then to fail under every mode this
host gives, while a test suite's own unix socket (in the worktree, under its TMPDIR) still
works, and so do the network modes a project may choose (tests/test_sandbox_network.py).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import confined

from orchestrator.sandbox.confine import Network, Place, Sandbox
from orchestrator.workspace.shell import agent_env

ATTACKS = r"""
import errno, json, os, socket, sys

host, udp_port = sys.argv[1], int(sys.argv[2])

def own(folder):
    path = os.path.join(folder, "own.sock")
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    client = socket.socket(socket.AF_UNIX)
    client.connect(path)
    peer, _ = server.accept()
    client.sendall(b"ping")
    assert peer.recv(4) == b"ping"
    os.unlink(path)

def from_a_thread():  # the call names the thread, not the process leader
    import threading
    failed = []
    def connect():
        try:
            own(".")
        except OSError as exc:
            failed.append(exc)
    worker = threading.Thread(target=connect)
    worker.start()
    worker.join()
    if failed:
        raise failed[0]

def via_link():
    link = "to-host.sock"
    if os.path.lexists(link):
        os.unlink(link)
    os.symlink(host, link)
    socket.socket(socket.AF_UNIX).connect(link)

def pair():
    left, right = socket.socketpair()
    left.sendall(b"x")
    assert right.recv(1) == b"x"

def datagram():
    socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"x", host)

attempts = {
    "host socket": lambda: socket.socket(socket.AF_UNIX).connect(host),
    "host socket via a link": via_link,
    "unix datagram": datagram,
    "udp": lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(
        b"exfil", ("127.0.0.1", udp_port)
    ),
    "udp6": lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM).sendto(b"x", ("::1", 9)),
    "own socket in the worktree": lambda: own("."),
    "own socket in TMPDIR": lambda: own(os.environ["TMPDIR"]),
    "socketpair": pair,
    "own socket from a thread": from_a_thread,
}
results = {}
for name, attempt in attempts.items():
    try:
        attempt()
        results[name] = "ok"
    except OSError as exc:
        results[name] = errno.errorcode.get(exc.errno, str(exc.errno))
print(json.dumps(results))
"""
OWN = (
    "own socket in the worktree",
    "own socket in TMPDIR",
    "socketpair",
    "own socket from a thread",
)


class Host:
    """A daemon's socket outside every granted directory, and a UDP listener."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="teaparty-daemon-", dir="/tmp"))
        self.folder.chmod(0o755)
        self.path = self.folder / "daemon.sock"
        self.stream = socket.socket(socket.AF_UNIX)
        self.stream.bind(str(self.path))
        self.stream.listen(8)
        self.path.chmod(0o777)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.setblocking(False)

    def received(self) -> list[str]:
        """What reached the daemon: connections accepted and datagrams, drained now."""
        got = []
        self.stream.setblocking(False)
        while True:
            try:
                conn, _ = self.stream.accept()
            except BlockingIOError:
                break
            conn.close()
            got.append("connection")
        while True:
            try:
                got.append(self.udp.recv(100).decode())
            except BlockingIOError:
                break
        return got

    def close(self) -> None:
        self.stream.close()
        self.udp.close()
        self.path.unlink(missing_ok=True)
        self.folder.rmdir()


@pytest.fixture
def host() -> Iterator[Host]:
    daemon = Host()
    yield daemon
    daemon.close()


async def attack(sandbox: Sandbox, work: Path, host: Host, network: Network) -> dict[str, str]:
    command = f"python3 -I -c '{ATTACKS}' {host.path} {host.udp.getsockname()[1]}"
    env = agent_env({"PATH": "/usr/bin:/bin"}, sandbox=sandbox)
    if not sandbox.confined:
        env["TMPDIR"] = str(work)
    done = await sandbox.run(
        command,
        place=Place(work, writable=True),
        env=env,
        timeout_s=60,
        cap=20_000,
        network=network,
    )
    await sandbox.close()
    assert done.returncode == 0, done.output.text()
    results: dict[str, str] = json.loads(done.output.text().strip().splitlines()[-1])
    return results


@pytest.fixture(params=["off", "bwrap", "landlock"])
def sandbox(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    yield from confined(request.param, f"sockets-{request.param}-{os.getpid()}")


async def test_a_host_socket_and_udp_are_out_of_reach_and_own_sockets_work(
    sandbox: tuple[Sandbox, Path], host: Host
) -> None:
    found, work = sandbox
    results = await attack(found, work, host, Network())
    assert {results[name] for name in OWN} == {"ok"}, results
    if not found.confined:  # the attacks work, so that the checks below mean something
        assert results["host socket"] == results["host socket via a link"] == "ok", results
        assert results["udp"] == "ok", results
        assert host.received().count("connection") == 2
        return
    for name in ("host socket", "host socket via a link", "unix datagram"):
        assert results[name] != "ok", (name, results)
    if found.mode == "landlock":  # bwrap's own network namespace has a loopback of its own
        assert results["udp"] == results["udp6"] == "EACCES", results
    assert host.received() == [], "nothing reached the daemon or the UDP listener"


async def test_an_open_network_lets_udp_out_but_never_the_host_socket(
    sandbox: tuple[Sandbox, Path], host: Host
) -> None:
    found, work = sandbox
    if not found.confined:
        pytest.skip("shown above: unconfined, everything is reached")
    results = await attack(found, work, host, Network(open=True))
    assert {results[name] for name in OWN} == {"ok"}, results
    assert results["udp"] == "ok", results
    assert results["host socket"] != "ok", results
    assert results["host socket via a link"] != "ok", results
    assert host.received() == ["exfil"]
