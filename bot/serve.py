"""`teaparty serve`: the GitHub App server, configured from the environment.

Its HTTP server, uvicorn bounded against clients that are slow or many, is
bot/server/http_server.py.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from bot.errors import SettingsError
from bot.server.http_server import app_server
from bot.server.runtime import Runtime
from bot.settings import Settings
from orchestrator.api import AgentDef, Model, ModelKind, OrchestratorError
from orchestrator.api import models as agent_models

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2

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
