"""`teaparty doctor`: how this host confines agents, and exactly what each mode guarantees."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.errors import SettingsError
from bot.local import UsageError, _top_level
from bot.settings import setup_secret_names
from orchestrator.api import (
    ConfigError,
    GitError,
    Sandbox,
    SandboxError,
    check_setup,
    git_version,
    load_organisation,
    probe,
    shipped_org_dir,
)

EXIT_OK, EXIT_UNCONFINED, EXIT_USAGE = 0, 1, 2


def doctor_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Print the sandbox this host gives agents and each mode's verdict; 1 if none confines.
    With `--repo`: then what the repository's setup does, and whether its tests run."""
    home = Path(args.home or environ.get("TEAPARTY_HOME") or Path.home() / ".teaparty").resolve()
    code = asyncio.run(_doctor(home, environ))
    if args.repo is None or code != EXIT_OK:
        return code
    print()
    try:
        repo = _top_level(args.repo)
        org_dir = Path(environ["TEAPARTY_CONFIG"]) if environ.get("TEAPARTY_CONFIG") else None
        return asyncio.run(_repository(repo, home, environ, org_dir=org_dir, run=args.run))
    except (UsageError, ConfigError, SettingsError, SandboxError, GitError) as exc:
        print(f"teaparty doctor --repo: {exc}", file=sys.stderr)
        return EXIT_USAGE


async def _repository(
    repo: Path, home: Path, environ: Mapping[str, str], *, org_dir: Path | None, run: bool
) -> int:
    """Describe, prepare and try the repository's setup; 1 when a step or its test fails."""
    sandbox = await probe(environ, home=home)
    org = load_organisation(org_dir or shipped_org_dir())
    try:
        verdict = await check_setup(
            repo,
            org=org,
            sandbox=sandbox,
            home=home,
            env=environ,
            allowed=setup_secret_names(environ),
            run=run,
        )
    finally:
        await sandbox.close()
    print("\n".join(verdict.lines))
    return EXIT_OK if verdict.ok else EXIT_UNCONFINED


async def _doctor(home: Path, environ: Mapping[str, str]) -> int:
    try:
        chosen = await probe(environ, home=home)
    except SandboxError as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return EXIT_UNCONFINED
    _describe("sandbox in use", chosen)
    for mode in ("bwrap", "landlock"):
        if mode == chosen.mode:
            continue
        try:
            other = await probe({**environ, "TEAPARTY_SANDBOX": mode}, home=home)
        except SandboxError as exc:
            print(f"\n{mode}: not available here: {exc}")
        else:
            _describe(f"{mode} (also works here; TEAPARTY_SANDBOX={mode} selects it)", other)
    print()
    print(f"TEAPARTY_HOME: {home} ({_mode(home)})")
    store = home / "teaparty.db"
    if store.exists():
        print(f"store: {store} ({_mode(store)})")
    print(f"git: {await git_version() or 'not found'}")
    return EXIT_OK if chosen.mode in ("bwrap", "landlock", "off") else EXIT_UNCONFINED


def _describe(title: str, sandbox: Sandbox) -> None:
    print(f"{title}: {sandbox.mode} ({sandbox.reason})")
    if sandbox.mode == "unavailable":
        print(
            "  agents' shells will not run: jobs whose agents have a shell fail with this "
            "reason, unless TEAPARTY_SANDBOX=off is set"
        )
    for line in sandbox.guarantees:
        print(f"  - {line}")


def _mode(path: Path) -> str:
    try:
        return f"mode {oct(os.stat(path).st_mode & 0o777)}"
    except OSError as exc:
        return f"not readable: {exc.strerror}"
