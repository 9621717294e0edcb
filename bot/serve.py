"""`teaparty serve`: the GitHub App server, configured from the environment."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from bot.errors import SettingsError
from bot.runtime import Runtime, server
from bot.settings import Settings
from orchestrator import local_run
from orchestrator.config import AgentDef
from orchestrator.errors import OrchestratorError
from orchestrator.local_run import ModelKind
from orchestrator.ports import Model

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


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
    runtime = await Runtime.open(settings, models=models(model, env), env=env)
    gc.freeze()  # what startup allocated is never collected: shorter full collections later
    try:
        await runtime.run(server(runtime.app, host=host, port=port))
    finally:
        await runtime.close()


def models(kind: ModelKind | None, env: Mapping[str, str]) -> Callable[[AgentDef], Model]:
    """Anthropic with a key (or when asked), else the scripted stand-in, which says so."""
    chosen: ModelKind = kind or ("anthropic" if env.get("ANTHROPIC_API_KEY") else "scripted")
    if chosen == "scripted":
        logging.getLogger(__name__).warning(
            "no ANTHROPIC_API_KEY: agents are played by the scripted stand-in"
        )
    return local_run.models(chosen, env)
