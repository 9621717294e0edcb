"""`teaparty serve`: the GitHub App server, configured from the environment.

The HTTP server is uvicorn on h11, bounded against clients that are slow or many: a
request's head and body must arrive within `TEAPARTY_BODY_TIMEOUT` seconds of its first
byte (a new connection's clock starts when it opens), a head may be at most
`MAX_HEAD_BYTES`, and past `TEAPARTY_MAX_CONNECTIONS` open connections a request gets 503.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar

import h11
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from bot.errors import SettingsError
from bot.server.endpoint import DEADLINE_PASSED
from bot.server.runtime import Runtime
from bot.settings import Settings
from orchestrator.api import AgentDef, Model, ModelKind, OrchestratorError
from orchestrator.api import models as agent_models

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_HEAD_BYTES = 16 * 1024  # GitHub's request heads are about 1 KB

log = logging.getLogger(__name__)


def serve_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run the App until interrupted."""
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = Settings.from_env(env, home=args.home)
    except SettingsError as exc:
        print(f"teaparty serve: {exc}", file=sys.stderr)
        return EXIT_USAGE
    try:
        _run(_serve(settings, env, host=args.host, port=args.port, model=args.model))
    except (OrchestratorError, SettingsError) as exc:
        print(f"teaparty serve: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop where it is installed (uvicorn[standard] brings it), else asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


async def _serve(
    settings: Settings, env: Mapping[str, str], *, host: str, port: int, model: ModelKind | None
) -> None:
    scripted = model_kind(model, env) == "scripted"
    runtime = await Runtime.open(settings, models=models(model, env), env=env, scripted=scripted)
    gc.freeze()  # what startup allocated is never collected: shorter full collections later
    try:
        await runtime.run(app_server(runtime.app, settings, host=host, port=port))
    finally:
        await runtime.close()


def model_kind(kind: ModelKind | None, env: Mapping[str, str]) -> ModelKind:
    """Anthropic with a key (or when asked), else the scripted stand-in."""
    return kind or ("anthropic" if env.get("ANTHROPIC_API_KEY") else "scripted")


def models(kind: ModelKind | None, env: Mapping[str, str]) -> Callable[[AgentDef], Model]:
    """The model factory for `kind` (see model_kind); the scripted stand-in says so."""
    chosen = model_kind(kind, env)
    if chosen == "scripted":
        log.warning("no ANTHROPIC_API_KEY: agents are played by the scripted stand-in")
    return agent_models(chosen, env)


def app_server(app: FastAPI, settings: Settings, *, host: str, port: int) -> uvicorn.Server:
    """uvicorn for the App: h11 with a request deadline, a bounded head, bounded connections."""
    protocol = type("AppProtocol", (DeadlineProtocol,), {"deadline_s": settings.body_timeout_s})
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        access_log=False,  # one line per delivery comes from the worker instead
        http=protocol,
        ws="none",  # the App takes no WebSocket: an upgrade request is plain HTTP to it
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        limit_concurrency=settings.max_connections,
    )
    return uvicorn.Server(config)


class DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol, closing a connection whose request does not arrive in time.

    The clock runs while the client owes bytes: from a connection's opening (or the first
    byte of a later request on it) until the request's body is complete. What the App then
    takes to answer is not the client's time. uvicorn has no such limit of its own: a
    client that stops sending would hold its connection, and its memory, for ever.
    """

    deadline_s: ClassVar[float] = 10.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._timer: asyncio.TimerHandle | None = None
        super().connection_made(transport)  # type: ignore[arg-type]
        self._settle()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._settle()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._settle()  # a pipelined request may have begun

    def connection_lost(self, exc: Exception | None) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().connection_lost(exc)

    def _owed(self) -> bool:
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            return True
        return state is h11.IDLE and (self.cycle is None or bool(self.conn.trailing_data[0]))

    def _settle(self) -> None:
        if self._owed():
            if self._timer is None:
                self._timer = self.loop.call_later(self.deadline_s, self._expire)
        elif self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self.conn.their_state is h11.SEND_BODY and cycle and not cycle.response_complete:
            cycle.scope.setdefault("state", {})[DEADLINE_PASSED] = self.deadline_s
        else:  # no request head yet: nothing names a delivery, so the line is ours
            peer = f"{self.client[0]}:{self.client[1]}" if self.client else "?"
            log.info("closed %s: no complete request head in %g s", peer, self.deadline_s)
        self.transport.close()
