"""`teaparty action`'s command line: the run's environment in, one clear line out on failure.

A run whose event concerns no job (the App's own comment, another bot's) exits at once,
before anything is loaded. Otherwise the event is applied (bot/runner/action.py) to the
store under `TEAPARTY_HOME` (default: `$RUNNER_TEMP/teaparty`), the run's summary goes to
`GITHUB_STEP_SUMMARY`, the name of what the setup cache (`TEAPARTY_HOME/setup`) holds to
`GITHUB_OUTPUT` as `setup-key` (for the workflow to save it with `actions/cache`), and the
exit status is 0, or 1 with one line saying what failed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from bot.errors import BotError, SettingsError
from bot.runner.env import CONTINUATION, ActionEnv, ignored_cheaply

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
log = logging.getLogger(__name__)


def action_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Apply the run's event; the exit status."""
    home = Path(
        environ.get("TEAPARTY_HOME")
        or Path(environ.get("RUNNER_TEMP") or tempfile.gettempdir()) / "teaparty"
    )
    try:
        env = ActionEnv.from_env(environ, home=home)
        payload = json.loads(env.event_path.read_bytes())
    except SettingsError as exc:
        return _fail("; ".join(exc.problems), EXIT_USAGE)
    except (OSError, ValueError) as exc:
        return _fail(f"cannot read the event: {exc}", EXIT_USAGE)
    if (
        isinstance(payload, dict)
        and env.event_name != CONTINUATION
        and (why := ignored_cheaply(env.event_name, payload, env.bot_login))
    ):
        print(f"teaparty action: {why}")
        _write_summary(env, f"## TeaParty\n\n{why}\n")
        return EXIT_OK
    # The engine, and the state's git: only for a run with work.
    from bot.runner.action import ActionRun, run_action, state_auth, summary
    from bot.runner.state import DEFAULT_REF, StateRef
    from bot.runner.state_records import StateRaceError
    from bot.serve import configure_logging, model_kind, models
    from orchestrator.api import (
        OrchestratorError,
        PreservedRaceError,
        cache_snapshot_key,
        forget_ended_work,
    )

    configure_logging()
    kind = model_kind(args.model, environ)
    factory = models(args.model, environ)
    temp = Path(environ.get("RUNNER_TEMP") or tempfile.gettempdir())
    keep = environ.get("TEAPARTY_STATE_REF", "").strip() or DEFAULT_REF

    remote = f"{env.server_url.rstrip('/')}/{env.owner}/{env.repo}.git"

    async def run_with_state() -> ActionRun:
        if keep == "off":  # the store stays in TEAPARTY_HOME (a self-hosted runner's disk)
            return await run_action(env, models=factory, scripted=kind == "scripted")
        auth = await state_auth(env)

        async def apply(home: Path) -> ActionRun:
            try:
                return await run_action(
                    env, models=factory, scripted=kind == "scripted", preserve=(remote, auth)
                )
            except PreservedRaceError as exc:  # another run preserved newer work: start over
                shutil.rmtree(home / "repos", ignore_errors=True)  # from its branches, not ours
                raise StateRaceError(str(exc), base=None, found=None) from exc

        state = StateRef(
            remote,
            work=temp / f"teaparty-state-{env.run_id}",
            ref=keep,
            auth=auth,
            run=f"{env.server_url.rstrip('/')}/{env.owner}/{env.repo}/actions/runs/{env.run_id}",
        )
        applied = await state.apply_with_retries(
            env.home, apply, message=f"TeaParty: {env.event_name} (run {env.run_id})"
        )
        await forget_ended_work(env.home, remote, auth=auth)  # ended jobs' refs, once saved
        return applied.value

    try:
        run = asyncio.run(run_with_state())
    except (BotError, OrchestratorError) as exc:
        return _fail(str(exc), EXIT_FAILED)
    _write_summary(env, summary(run, env))
    if (setup_key := cache_snapshot_key(env.home / "setup")) is not None:
        _write_output(env, "setup-key", setup_key)
    print(f"teaparty action: {run.outcome}")
    return EXIT_OK


def _write_summary(env: ActionEnv, text: str) -> None:
    if env.summary_path is None:
        return
    try:
        with env.summary_path.open("a", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:  # the summary is a courtesy: the run's work is done
        log.warning("the run's summary was not written: %s", exc)


def _write_output(env: ActionEnv, name: str, value: str) -> None:
    """One output of the step (GITHUB_OUTPUT): the workflow saves the setup cache under
    `setup-key` when no run saved it before."""
    if env.output_path is None:
        return
    try:
        with env.output_path.open("a", encoding="utf-8") as out:
            out.write(f"{name}={value}\n")
    except OSError as exc:  # the cache is a courtesy too: the next run prepares again
        log.warning("the step's output %s was not written: %s", name, exc)


def _fail(message: str, status: int) -> int:
    print(f"teaparty action: {message}", file=sys.stderr)
    return status
