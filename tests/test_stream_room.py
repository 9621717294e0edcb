"""Live job pages' streams hold none of the webhook edge's room: with more streams open than
the edge allows connections (overall and per client), requests are still served; at shutdown
the streams are told to end and the server stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest
from app_harness import until
from fastapi import FastAPI
from starlette.responses import StreamingResponse

from bot.demo import private_key_pem
from bot.job_pages import STREAM_PATH
from bot.server.http_server import app_server, listen
from bot.settings import Settings

pytestmark = pytest.mark.timeout(60)
STREAMS = 6


def settings() -> Settings:
    env = {
        "GITHUB_APP_ID": "1",
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_APP_PRIVATE_KEY": private_key_pem(),
        "TEAPARTY_MAX_CONNECTIONS": "4",
        "TEAPARTY_MAX_CONNECTIONS_PER_CLIENT": "2",
    }
    return Settings.from_env(env)


def streaming_app(stop: asyncio.Event) -> FastAPI:
    app = FastAPI()

    async def events() -> AsyncIterator[str]:
        yield "event: page\ndata: {}\n\n"
        await stop.wait()
        yield "event: end\ndata: {}\n\n"

    @app.get("/jobs/{job_id}/live")
    async def live(job_id: int) -> StreamingResponse:
        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/healthz")
    async def healthz() -> dict[str, bool]:
        return {"ok": True}

    return app


async def request(port: int, path: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await writer.drain()
    return reader, writer


async def test_streams_take_no_room_of_the_webhook_edge() -> None:
    stop = asyncio.Event()
    listener = listen("127.0.0.1", 0)
    port = listener.getsockname()[1]
    server = app_server(
        streaming_app(stop), settings(), listener, stream_path=STREAM_PATH, stopping=stop.set
    )
    serving = asyncio.create_task(server.serve())
    await until(lambda: server.started, what="the server to start")
    streams = []
    for n in range(STREAMS):  # three times one client's bound, more than the whole edge's
        reader, writer = await request(port, f"/jobs/{n}/live")
        head = await reader.readuntil(b"event: page")
        assert head.startswith(b"HTTP/1.1 200"), head
        streams.append((reader, writer))
    assert server.protocol is not None
    assert len(server.protocol.streams) == STREAMS
    for _ in range(3):
        reader, writer = await request(port, "/healthz")
        answer = await reader.readuntil(b'{"ok":true}')
        assert answer.startswith(b"HTTP/1.1 200"), answer
        writer.close()
    server.should_exit = True
    for reader, writer in streams:
        rest = await reader.read()  # the connection closes once its stream has ended
        assert b"event: end" in rest
        writer.close()
    await serving
    assert not server.protocol.streams
    assert not server.protocol.stream_tasks
    listener.close()
