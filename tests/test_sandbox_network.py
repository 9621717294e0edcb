"""A project's `sandbox.network`: off by default, open, or listed hosts through the proxy.

A local HTTP server stands in for the internet; names resolve through the test's own
resolver (to 127.0.0.1), so nothing leaves this machine.
"""

from __future__ import annotations

import http.server
import ipaddress
import threading
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import confined

from orchestrator.sandbox.confine import Network, Place, Sandbox
from orchestrator.sandbox.netproxy import EgressProxy, IPAddress
from orchestrator.workspace.shell import agent_env

LOOPBACK = ipaddress.ip_address("127.0.0.1")


class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"hello from outside")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()
    httpd.server_close()


async def resolve(host: str, port: int) -> Sequence[IPAddress]:
    return [LOOPBACK]


def egress(hosts: Sequence[str]) -> EgressProxy:
    return EgressProxy(hosts, allow_private=True, ports=range(1, 65536), resolve=resolve)


@pytest.fixture(params=["bwrap", "landlock"])
def confined_with_proxy(
    request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[tuple[Sandbox, Path]]:
    for found, work in confined(request.param, f"net-{tmp_path.name}"):
        yield replace(found, egress=egress), work


FETCH = (
    'python3 -c "import urllib.request, sys\n'
    "try:\n print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n"
    "except Exception as exc:\n print('failed:', exc)\" "
)
DIRECT = (
    'python3 -c "import socket, sys\n'
    "try:\n socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=5)\n"
    " print('connected')\n"
    "except OSError as exc:\n print('refused:', exc)\" "
)


async def run(sandbox: Sandbox, work: Path, command: str, network: Network) -> str:
    env = agent_env({"PATH": "/usr/bin:/bin"}, sandbox=sandbox)
    done = await sandbox.run(
        command,
        place=Place(work, writable=True),
        env=env,
        timeout_s=30,
        cap=10_000,
        network=network,
    )
    await sandbox.close()
    return done.output.text()


async def test_listed_hosts_are_reached_through_the_proxy_and_nothing_else(
    confined_with_proxy: tuple[Sandbox, Path], server: int
) -> None:
    sandbox, work = confined_with_proxy
    listed = Network(hosts=("pypi.test",))
    assert "hello from outside" in await run(
        sandbox, work, FETCH + f"http://pypi.test:{server}/", listed
    )
    refused = await run(sandbox, work, FETCH + f"http://evil.test:{server}/", listed)
    assert "failed: HTTP Error 403" in refused
    assert "refused:" in await run(sandbox, work, DIRECT + str(server), listed)


async def test_the_network_is_off_by_default_and_open_on_request(
    confined_with_proxy: tuple[Sandbox, Path], server: int
) -> None:
    sandbox, work = confined_with_proxy
    assert "refused:" in await run(sandbox, work, DIRECT + str(server), Network())
    assert "failed:" in await run(sandbox, work, FETCH + f"http://pypi.test:{server}/", Network())
    assert "connected" in await run(sandbox, work, DIRECT + str(server), Network(open=True))
