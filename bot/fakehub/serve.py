"""Serving an ASGI app on 127.0.0.1 with uvicorn: in the running event loop or on a thread."""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

import uvicorn
from starlette.types import ASGIApp


@asynccontextmanager
async def serve_local(app: ASGIApp) -> AsyncIterator[str]:
    """Run `app` on a free port of 127.0.0.1 in this loop; yields `http://127.0.0.1:PORT/`."""
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=0,
        http="h11",
        ws="none",
        lifespan="off",
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=5,
    )
    config.load()
    server = uvicorn.Server(config)
    # Server.serve() would also take over SIGINT; drive its phases ourselves instead.
    server.lifespan = config.lifespan_class(config)
    await server.startup()  # bound and listening once this returns
    port = server.servers[0].sockets[0].getsockname()[1]
    ticking = asyncio.create_task(server.main_loop())
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        await ticking
        await server.shutdown()


class ThreadRunner:
    """Keeps an async server context open on a thread with its own event loop until `stop()`."""

    def __init__(self, serve: Callable[[], AbstractAsyncContextManager[str]]) -> None:
        self._serve = serve
        self._events: queue.Queue[str | BaseException] = queue.Queue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._done: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="fakehub", daemon=True)

    def start(self) -> str:
        """Start the thread; returns the base URL once the server listens."""
        self._thread.start()
        first = self._events.get(timeout=60)
        if isinstance(first, BaseException):
            raise first
        return first

    def stop(self) -> None:
        """Shut the server down and join the thread; re-raises what failed there."""
        if self._loop is not None and self._done is not None:
            self._loop.call_soon_threadsafe(self._done.set)
        self._thread.join(timeout=60)
        if not self._events.empty() and isinstance(error := self._events.get(), BaseException):
            raise error

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as exc:  # handed to the caller's thread by start() or stop()
            self._events.put(exc)

    async def _run(self) -> None:
        self._loop, self._done = asyncio.get_running_loop(), asyncio.Event()
        async with self._serve() as url:
            self._events.put(url)
            await self._done.wait()
