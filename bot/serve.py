"""`teaparty serve`: the GitHub App server, configured from the environment.

Its HTTP server, uvicorn bounded against clients that are slow or many, is
bot/server/http_server.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import logging
import signal
import socket
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping
from typing import Any

import uvicorn

from bot.errors import SettingsError
from bot.job_pages import STREAM_PATH, JobPages
from bot.server.http_server import ListenError, app_server, listen
from bot.server.runtime import Runtime
from bot.settings import Settings
from orchestrator.api import (
    AgentDef,
    ConfigError,
    Model,
    ModelKind,
    OrchestratorError,
    SandboxError,
    StoreLockedError,
)
from orchestrator.api import models as agent_models

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
SIGNALS = (signal.SIGINT, signal.SIGTERM)

log = logging.getLogger(__name__)


def serve_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run the App until SIGTERM (exit 0) or Ctrl-C (130); bot.cli.SERVE_EXIT_CODES has all."""
    configure_logging()
    try:
        settings, port = configuration(args, env)
        listener = listen(args.host, port)
    except SettingsError as exc:
        return _fail(_problems(exc), EXIT_USAGE)
    except ListenError as exc:
        return _fail(str(exc), EXIT_ENVIRONMENT)
    stop = Stop()
    try:
        _run(_serve(settings, env, listener=listener, model=args.model, stop=stop))
    except StoreLockedError as exc:
        return _fail(str(exc), EXIT_ENVIRONMENT)
    except (ConfigError, SandboxError) as exc:
        return _fail(str(exc), EXIT_USAGE)
    except (OrchestratorError, SettingsError) as exc:
        return _fail(str(exc), EXIT_FAILED)
    except KeyboardInterrupt:  # before the loop's own handler was in place
        return EXIT_INTERRUPTED
    finally:
        listener.close()
    return stop.exit_code


def configuration(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[Settings, int]:
    """The settings and the port; SettingsError lists every problem, of options and variables."""
    problems: list[str] = []
    try:
        settings = Settings.from_env(env, home=args.home)
    except SettingsError as exc:
        problems.extend(exc.problems)
    port = str(args.port)
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        problems.append(f"--port {port}: must be a whole number from 1 to 65535")
    if args.model == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        problems.append("--model anthropic: ANTHROPIC_API_KEY is not set")
    if problems:
        raise SettingsError(*problems)
    return settings, int(port)


def configure_logging() -> None:
    """One handler and one format on the root logger, for our records and uvicorn's alike
    (its server is built with log_config=None). A root that has handlers is left alone."""
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)


class Stop:
    """SIGINT and SIGTERM: the first stops the server gracefully, a second at once.

    A signal while the App is still starting is kept and acted on when start-up is done:
    cancelling it half way would leave the store's thread answering a closed loop.
    """

    def __init__(self) -> None:
        self.signum: int | None = None
        self.server: uvicorn.Server | None = None

    @contextlib.contextmanager
    def handling(self) -> Iterator[None]:
        """SIGINT and SIGTERM go to `on_signal` in the running loop until the block ends
        (uvloop would leave its handlers in place after the loop is closed)."""
        loop = asyncio.get_running_loop()
        for signum in SIGNALS:
            loop.add_signal_handler(signum, self.on_signal, signum)
        try:
            yield
        finally:
            for signum in SIGNALS:
                loop.remove_signal_handler(signum)

    def on_signal(self, signum: int) -> None:
        """Stop the server (the first time gracefully), or say it will stop once started."""
        first = self.signum is None
        self.signum = self.signum or signum
        if first:
            log.info("%s: stopping", signal.Signals(signum).name)
        self.serving(self.server)

    def serving(self, server: uvicorn.Server | None) -> None:
        """Follow `server` from now on; it stops at once if a signal came first."""
        self.server = server
        if server is not None and self.signum is not None:
            server.force_exit = server.should_exit  # a second signal: no more waiting
            server.should_exit = True

    @property
    def exit_code(self) -> int:
        """130 after SIGINT (what a shell reports for Ctrl-C), 0 otherwise."""
        return EXIT_INTERRUPTED if self.signum == signal.SIGINT else EXIT_OK


def _run(main: Coroutine[Any, Any, None]) -> None:
    """Run on uvloop where it is installed (uvicorn[standard] brings it), else asyncio."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(main)
    else:
        uvloop.run(main)


async def _serve(
    settings: Settings,
    env: Mapping[str, str],
    *,
    listener: socket.socket,
    model: ModelKind | None,
    stop: Stop,
) -> None:
    with stop.handling():
        scripted = model_kind(model, env) == "scripted"
        factory = models(model, env)
        runtime = await Runtime.open(settings, models=factory, env=env, scripted=scripted)
        pages = await JobPages.start(settings, env, runtime.app)
        gc.freeze()  # what startup allocated is never collected: shorter full collections later
        try:
            server = app_server(
                runtime.app,
                settings,
                listener,
                stream_path=STREAM_PATH,
                stopping=pages.close if pages is not None else _nothing,
            )
            stop.serving(server)
            host, port = listener.getsockname()[:2]
            log.info("listening on http://%s:%d", host, port)
            if pages is not None:
                log.info("job pages at %s/jobs, for people signed in with GitHub", pages.public_url)
            await runtime.run(server)
        finally:
            if pages is not None:
                await pages.aclose()
            await runtime.close()
        log.info("stopped")


def _nothing() -> None:
    """No job pages to stop."""


def _problems(exc: SettingsError) -> str:
    if len(exc.problems) == 1:
        return exc.problems[0]
    return f"{len(exc.problems)} problems:" + "".join(f"\n  {p}" for p in exc.problems)


def _fail(message: str, status: int) -> int:
    print(f"teaparty serve: {message}", file=sys.stderr)
    return status


def model_kind(kind: ModelKind | None, env: Mapping[str, str]) -> ModelKind:
    """Anthropic with a key (or when asked), else the scripted stand-in."""
    return kind or ("anthropic" if env.get("ANTHROPIC_API_KEY") else "scripted")


def models(kind: ModelKind | None, env: Mapping[str, str]) -> Callable[[AgentDef], Model]:
    """The model factory for `kind` (see model_kind); the scripted stand-in says so."""
    chosen = model_kind(kind, env)
    if chosen == "scripted":
        log.warning("no ANTHROPIC_API_KEY: agents are played by the scripted stand-in")
    return agent_models(chosen, env)
