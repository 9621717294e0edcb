"""POST /webhook under abuse, against a real `teaparty serve` over raw sockets on 127.0.0.1.

No signature is refused before the body is read; a wrong one after streaming it through the
HMAC; chunked bodies take the same path; a stalled request is cut at the deadline; deep
JSON and huge integers are a 400; a client leaving mid-body is one log line; request values
are escaped in the log; a good delivery sent during a storm is stored and handled; one
address holding idle connections leaves room for the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from app_harness import SECRET, Server, served, until

from bot.server.http_server import MAX_HEAD_BYTES
from bot.server.webhooks import signature

DEADLINE_S = 1.0
SLACK_S = 3.0  # a loaded 2-core CI machine: the deadline plus this is "in time"
pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.timeout(60)]


@dataclass
class App:
    server: Server
    port: int

    @property
    def db(self) -> Path:
        return Path(self.server.env["TEAPARTY_HOME"]) / "teaparty.db"

    def lines(self, text: str) -> list[str]:
        return [line for line in self.server.output().splitlines() if text in line]


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def app(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[App]:
    root = tmp_path_factory.mktemp("abuse")
    env = {
        "TEAPARTY_BODY_TIMEOUT": str(DEADLINE_S),
        # the storms below come from one address, standing for many behind a proxy:
        # what a client alone may hold is tested on its own at the end
        "TEAPARTY_TRUSTED_PROXIES": "127.0.0.1",
    }
    async with served(root, env=env) as world:
        yield App(world.server, world.port)
    log = (root / "server.log").read_text(errors="replace")
    assert "Traceback" not in log, log
    assert "Exception in ASGI application" not in log, log


def request_head(
    body: bytes = b"{}",
    *,
    delivery: str,
    sign: str | None = "good",
    chunked: bool = False,
    extra: Mapping[str, str] | None = None,
) -> bytes:
    """The head of a POST /webhook; `sign` is "good", a literal signature, or None (absent)."""
    lines = [
        "POST /webhook HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        "X-GitHub-Event: ping",
        f"X-GitHub-Delivery: {delivery}",
        "Transfer-Encoding: chunked" if chunked else f"Content-Length: {len(body)}",
    ]
    if sign is not None:
        lines.append(f"X-Hub-Signature-256: {signature(SECRET, body) if sign == 'good' else sign}")
    lines += [f"{name}: {value}" for name, value in (extra or {}).items()]
    return "\r\n".join(lines).encode("latin-1") + b"\r\n\r\n"


def chunks(body: bytes, size: int = 64 * 1024) -> bytes:
    framed = [
        b"%x\r\n%b\r\n" % (len(piece), piece)
        for piece in (body[i : i + size] for i in range(0, len(body), size))
    ]
    return b"".join(framed) + b"0\r\n\r\n"


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, str]:
        return dict(json.loads(self.body))


@contextlib.asynccontextmanager
async def connection(port: int) -> AsyncIterator[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        yield reader, writer
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


async def reply(reader: asyncio.StreamReader) -> Reply:
    """Read one response (status, headers, Content-Length body)."""
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in filter(None, header_lines):
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get("content-length", "0")))
    return Reply(int(status_line.split()[1]), headers, body)


async def closed_after(reader: asyncio.StreamReader, began: float) -> float:
    """Seconds from `began` until the server closed the connection."""
    with contextlib.suppress(ConnectionError):  # reset, or a write that failed before
        while await asyncio.wait_for(reader.read(65536), DEADLINE_S + SLACK_S):
            pass
    return time.monotonic() - began


async def post(port: int, head: bytes, body: bytes = b"") -> Reply:
    async with connection(port) as (reader, writer):
        writer.write(head + body)
        await writer.drain()
        return await reply(reader)


def state_of(app: App, delivery_id: str) -> tuple[str, str | None] | None:
    with contextlib.closing(sqlite3.connect(f"file:{app.db}?mode=ro", uri=True)) as db:
        return db.execute(
            "SELECT state, outcome FROM deliveries WHERE delivery_id = ?", (delivery_id,)
        ).fetchone()


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_no_signature_is_refused_before_the_body_is_read(app: App, chunked: bool) -> None:
    delivery = f"unsigned-{chunked}"
    big = b"x" * (20 * 1024 * 1024)  # declared (or begun), never sent
    async with connection(app.port) as (reader, writer):
        writer.write(request_head(big, delivery=delivery, sign=None, chunked=chunked))
        await writer.drain()
        began = time.monotonic()
        answer = await reply(reader)
        assert await closed_after(reader, began) < 1.0  # closed at once, not at the deadline
    assert answer.status == 401
    assert answer.headers["connection"] == "close"
    assert answer.json() == {"message": "no X-Hub-Signature-256 header", "delivery_id": delivery}
    assert state_of(app, delivery) is None


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_wrong_signature_is_refused_once_the_body_streamed_through(
    app: App, chunked: bool
) -> None:
    delivery = f"wrong-{chunked}"
    body = json.dumps({"zen": "x" * (3 * 1024 * 1024)}).encode()  # spooled past memory
    head = request_head(body, delivery=delivery, sign="sha256=" + "0" * 64, chunked=chunked)
    answer = await post(app.port, head, chunks(body) if chunked else body)
    assert answer.status == 401
    assert answer.json()["message"] == "X-Hub-Signature-256 does not match the body"
    assert state_of(app, delivery) is None

    good = f"good-{chunked}"  # the same body, signed: verified from its spool and stored
    head = request_head(body, delivery=good, chunked=chunked)
    answer = await post(app.port, head, chunks(body) if chunked else body)
    assert (answer.status, answer.json()["status"]) == (202, "queued")
    await until(lambda: state_of(app, good) == ("done", "pong"), what="the ping handled")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"zen": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests too deeply"),
        (b'{"zen": 1' + b"0" * 5_000 + b"}", "integer over 4300 digits"),
    ],
    ids=["deep", "huge-int"],
)
async def test_signed_json_python_cannot_read_is_400_not_500(
    app: App, body: bytes, words: str
) -> None:
    delivery = f"json-{words.split()[0]}"
    answer = await post(app.port, request_head(body, delivery=delivery), body)
    assert answer.status == 400
    assert words in answer.json()["message"]
    assert answer.json()["delivery_id"] == delivery
    assert len(app.lines(delivery)) == 1


async def test_a_stalled_body_is_closed_at_the_deadline_in_one_line(app: App) -> None:
    delivery = "stalled-body"
    async with connection(app.port) as (reader, writer):
        writer.write(request_head(b"x" * 100_000, delivery=delivery) + b'{"zen": "')
        await writer.drain()
        began = time.monotonic()
        waited = await closed_after(reader, began)
    assert DEADLINE_S * 0.8 < waited < DEADLINE_S + SLACK_S
    await until(lambda: app.lines(delivery), what="the log line", limit=5)
    (line,) = app.lines(delivery)
    assert f"body not complete in {DEADLINE_S:g} s (9 of 100,000 bytes)" in line


@pytest.mark.parametrize(
    "sent", [b"", b"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\n"], ids=["silent", "half-head"]
)
async def test_a_connection_without_a_whole_head_is_closed_at_the_deadline(
    app: App, sent: bytes
) -> None:
    async with connection(app.port) as (reader, writer):
        writer.write(sent)
        await writer.drain()
        began = time.monotonic()
        waited = await closed_after(reader, began)
    assert DEADLINE_S * 0.8 < waited < DEADLINE_S + SLACK_S


async def test_a_head_over_the_bound_is_refused(app: App) -> None:
    refusals = len(app.lines("Invalid HTTP request received."))
    head = request_head(delivery="big-head", extra={"X-Pad": "x" * (4 * MAX_HEAD_BYTES)})
    async with connection(app.port) as (reader, writer):
        with contextlib.suppress(ConnectionError):
            for start in range(0, len(head), 4096):  # as a slow client would send it
                writer.write(head[start : start + 4096])
                await writer.drain()
                await asyncio.sleep(0.01)
        assert await closed_after(reader, time.monotonic()) < 1.0
    assert len(app.lines("Invalid HTTP request received.")) == refusals + 1
    assert state_of(app, "big-head") is None


async def test_a_client_leaving_mid_body_is_one_log_line(app: App) -> None:
    delivery = "left-mid-body"
    async with connection(app.port) as (_, writer):
        writer.write(request_head(b"x" * 1_000_000, delivery=delivery) + b"x" * 100_000)
        await writer.drain()
        await asyncio.sleep(0.2)  # the server has read some of it
    await until(lambda: app.lines(delivery), what="the log line", limit=5)
    await asyncio.sleep(0.3)  # room for any (wrong) second line or traceback
    (line,) = app.lines(delivery)
    assert "the client closed the connection after" in line
    assert "of 1,000,000 bytes of the body; nothing stored" in line
    assert "Traceback" not in app.server.output()


async def test_values_from_requests_are_escaped_in_the_log(app: App) -> None:
    forged = "\x85\x1b[31mINFO bot.server.endpoint: delivery 'x' accepted"  # NEL starts a new line
    head = request_head(delivery="escape-me", extra={"User-Agent": "hookshot" + forged})
    answer = await post(app.port, head.replace(b"escape-me", b"bad\x85id"), b"{}")
    assert answer.status == 400  # the id is malformed: refused, and logged
    (line,) = app.lines("'bad\\x85id'")
    assert "hookshot\\x85\\x1b[31mINFO bot.server.endpoint: delivery 'x' accepted" in line
    assert b"\x1b" not in app.server.log.read_bytes()
    assert "\x85" not in app.server.output()


async def test_a_good_delivery_during_a_storm_is_stored_and_handled(app: App) -> None:
    stalled, unsigned, wrong = [], [], []
    for n in range(40):  # a head and some body, then silence
        reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
        writer.write(request_head(b"x" * 10_000_000, delivery=f"storm-{n}") + b"x" * 65_536)
        stalled.append((reader, writer))
    for n in range(20):  # no signature, a 10 MB body on its way
        reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
        writer.write(request_head(b"x" * 10_000_000, delivery=f"nosig-{n}", sign=None))
        unsigned.append((reader, writer))
    for n in range(20):  # chunked, wrong signature, still sending
        reader, writer = await asyncio.open_connection("127.0.0.1", app.port)
        writer.write(request_head(delivery=f"wrong-{n}", sign="sha256=1", chunked=True))
        writer.write(b"10000\r\n" + b"x" * 65_536 + b"\r\n")
        wrong.append((reader, writer))
    began = time.monotonic()
    await asyncio.sleep(0.2)

    body = b'{"zen": "Design for failure.", "hook_id": 7}'
    answer = await post(app.port, request_head(body, delivery="good-in-storm"), body)
    assert (answer.status, answer.json()["status"]) == (202, "queued")
    await until(lambda: state_of(app, "good-in-storm") == ("done", "pong"), what="the ping")

    for reader, writer in [*stalled, *unsigned, *wrong]:
        assert await closed_after(reader, began) < DEADLINE_S + SLACK_S
        writer.close()
    assert await app.server.pending() == 0


async def test_past_the_connection_bound_a_request_gets_503_until_the_deadline_frees_it(
    tmp_path: Path,
) -> None:
    env = {
        "TEAPARTY_BODY_TIMEOUT": str(DEADLINE_S),
        "TEAPARTY_MAX_CONNECTIONS": "4",
        "TEAPARTY_TRUSTED_PROXIES": "127.0.0.1",  # all four from one address
    }
    async with served(tmp_path, env=env) as world:
        server, port = world.server, world.port
        held = []
        for n in range(3):  # with these three, a fourth connection reaches the bound
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(request_head(b"x" * 1000, delivery=f"held-{n}") + b"x")
            held.append((reader, writer))
        await asyncio.sleep(0.3)  # their heads are in: each was let through
        body = b'{"zen": "Keep it simple."}'
        assert (await post(port, request_head(body, delivery="over"), body)).status == 503
        for reader, _ in held:
            assert await closed_after(reader, time.monotonic()) < DEADLINE_S + SLACK_S
        assert (await post(port, request_head(body, delivery="after"), body)).status == 202
        for _, writer in held:
            writer.close()
        assert server.output().count("Exceeded concurrency limit") == 1


async def answered_from_elsewhere(port: int, *, delivery: str | None = None) -> int:
    """The status 127.0.0.1 gets for GET /healthz, or for a signed delivery."""
    async with connection(port) as (reader, writer):
        if delivery is None:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        else:
            body = b'{"zen": "Keep it simple."}'
            writer.write(request_head(body, delivery=delivery) + body)
        await writer.drain()
        return (await reply(reader)).status


def held_by_server(sock: socket.socket) -> bool:
    """Whether the server holds `sock` open without having answered on it; read only after
    an answer on a later connection, by when any refusal of `sock` was already sent."""
    try:
        sock.recv(1, socket.MSG_PEEK)
    except BlockingIOError:
        return True
    except ConnectionError:
        pass
    return False  # answered (503), closed or reset


@pytest.mark.parametrize(
    ("trusted", "held_by_one", "then"),
    [("", 16, 200), ("127.0.0.2", 127, 503)],
    ids=["bound-per-client", "exempt-as-a-trusted-proxy"],
)
async def test_idle_connections_from_one_address_leave_room_for_the_others(
    tmp_path: Path, trusted: str, held_by_one: int, then: int
) -> None:
    """127.0.0.2 opens idle connections, one at a time, for as long as the server keeps
    them; after each, 127.0.0.1 asks for /healthz. With the default bounds (128 overall, 16
    per client) 127.0.0.2 is refused at its 17th and 127.0.0.1 is answered every time; a
    peer exempt from the per-client bound (a trusted proxy) fills the overall one instead."""
    env = {
        "TEAPARTY_BODY_TIMEOUT": "120",  # the idle connections outlast the test
        "TEAPARTY_TRUSTED_PROXIES": trusted,
    }
    async with served(tmp_path, env=env) as world:
        server, port = world.server, world.port
        opened: list[socket.socket] = []
        try:
            for _ in range(256):  # the server refuses one, or 127.0.0.1, before
                sock = socket.socket()
                opened.append(sock)
                sock.bind(("127.0.0.2", 0))
                sock.setblocking(False)
                await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
                health = await answered_from_elsewhere(port)
                if not held_by_server(sock) or health != 200:
                    break
            kept = sum(held_by_server(sock) for sock in opened)
            assert (kept, health) == (held_by_one, then)
            delivery = await answered_from_elsewhere(port, delivery="while-held")
            assert delivery == (202 if then == 200 else 503)
        finally:
            for sock in opened:
                sock.close()
        if not trusted:
            assert server.output().count("refusing connections from 127.0.0.2") == 1
