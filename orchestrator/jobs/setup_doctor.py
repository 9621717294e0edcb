"""`teaparty doctor --repo PATH`: what the repository's setup would do, a suggestion where it
has none, and its test command run once in the sandbox, in the prepared environment.

The setup is read as a job reads it (the project file at HEAD, committed) and prepared in
the state directory's cache exactly as a job of that repository would (`teaparty run` on
it then reuses it). The test command runs in a fresh checkout of HEAD's files, as an agent
of a task would run it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from orchestrator.config.schema import Organisation, SetupSettings
from orchestrator.core.ecosystems import PRESETS
from orchestrator.core.secrecy import KnownSecrets
from orchestrator.core.secret_scan import Scanner
from orchestrator.jobs.local_run import local_repository, read_project, user_git
from orchestrator.sandbox.confine import Place, Sandbox
from orchestrator.setup.cache import SetupCache, bound_from_env
from orchestrator.setup.prepare import Outcome, Preparer, cache_key, check_out, chown_tree
from orchestrator.setup.suggest import suggest
from orchestrator.workspace.shell import agent_env

TEST_TIMEOUT_S = 900.0
TAIL_LINES = 20


@dataclass(frozen=True)
class Verdict:
    """What doctor says of a repository's setup: its lines, and whether all is well."""

    lines: tuple[str, ...]
    ok: bool


async def check_setup(
    repo: Path,
    *,
    org: Organisation,
    sandbox: Sandbox,
    home: Path,
    env: Mapping[str, str],
    allowed: Sequence[str] = (),
    run: bool = True,
) -> Verdict:
    """Describe, prepare and try the setup of the repository at `repo` (ConfigError when
    its project file does not load; GitError when it is no repository)."""
    _, git_dir = await user_git(repo, "rev-parse", "--absolute-git-dir")
    _, head = await user_git(repo, "rev-parse", "HEAD")
    git_dir, head = git_dir.strip(), head.strip()
    project, _ = await read_project(repo, org)
    lines = [f"repository: {repo} (HEAD {head[:12]})"]
    if project.setup is None:
        return Verdict((*lines, *await _suggestion(repo)), True)
    setup = project.setup
    lines += _describe(setup, allowed)
    name = local_repository(repo)
    key = await cache_key(Path(git_dir), head, name, setup)
    lines.append(f"  cache key: {key}")
    if not run:
        return Verdict(tuple(lines), True)
    known = KnownSecrets.of(env, setup=allowed)
    preparer = Preparer(
        sandbox,
        SetupCache(home / "setup", bound_mb=bound_from_env(env)),
        parent_env=env,
        allowed=allowed,
        owner=lambda path: sandbox.uids.of(path) if sandbox.uids else sandbox.run_as,
        forget=sandbox.uids.forget if sandbox.uids else lambda _: None,
        mask=lambda text: Scanner(known.values()).redact(text),
    )
    outcome = await preparer.prepare(name=name, repo=Path(git_dir), base=head, setup=setup)
    lines += _prepared(outcome)
    if setup.test is None:
        lines.append("test: no `setup.test` to run")
        return Verdict(tuple(lines), outcome.ok)
    code, tail = await _try_test(Path(git_dir), head, setup.test, outcome, sandbox, home, env)
    lines.append(
        f"test `{setup.test}` in the sandbox ({sandbox.mode}): "
        + (
            "passed (exit 0)"
            if code == 0
            else f"FAILED ({'timed out' if code is None else f'exit {code}'})"
        )
    )
    lines += [f"  | {line}" for line in tail]
    return Verdict(tuple(lines), outcome.ok and code == 0)


def _describe(setup: SetupSettings, allowed: Sequence[str]) -> list[str]:
    lines = ["setup (.teaparty/project.yaml at HEAD):"]
    lines += [f"  {n}. {command}" for n, command in enumerate(setup.commands, 1)]
    if setup.network:
        named = [f"{n} ({', '.join(PRESETS[n])})" if n in PRESETS else n for n in setup.network]
        lines.append(f"  network during setup: {'; '.join(named)}")
    else:
        lines.append("  network during setup: none")
    for secret in setup.secrets:
        given = "given" if secret in allowed else "WITHHELD: not in TEAPARTY_SETUP_SECRETS"
        lines.append(f"  secret {secret}: {given}")
    lines.append(f"  time limit: {setup.timeout_minutes:g} min for all commands")
    if setup.key_files:
        lines.append(f"  keyed by: {', '.join(setup.key_files)}")
    return lines


def _prepared(outcome: Outcome) -> list[str]:
    if outcome.reused:
        head = "prepared: reused from the cache"
    else:
        head = f"prepared: in {outcome.seconds:.1f} s"
    lines = [f"{head}: {', '.join(outcome.paths) or 'nothing kept'}"]
    if outcome.bin:
        lines.append(f"  first on agents' PATH: {', '.join(outcome.bin)}")
    for step in outcome.steps:
        verdict = (
            "ok" if step.ok else ("stopped" if step.exit_code is None else f"exit {step.exit_code}")
        )
        lines.append(f"  {verdict:>8}  {step.seconds:6.1f} s  {step.command}")
    if (failed := outcome.failed) is not None:
        lines += [f"  | {line}" for line in failed.tail.splitlines()[-TAIL_LINES:]]
    if outcome.skipped:
        lines.append(f"  not kept (files outside a directory): {', '.join(outcome.skipped[:10])}")
    return lines


async def _try_test(
    git_dir: Path,
    head: str,
    test: str,
    outcome: Outcome,
    sandbox: Sandbox,
    home: Path,
    env: Mapping[str, str],
) -> tuple[int | None, list[str]]:
    """Run `test` once in a fresh checkout of `head`, as a task's agent would."""
    (home / "doctor").mkdir(parents=True, exist_ok=True, mode=0o711)
    folder = Path(await asyncio.to_thread(tempfile.mkdtemp, dir=home / "doctor"))
    os.chmod(folder, 0o711)
    work = folder / "work"
    try:
        await check_out(git_dir, head, work)
        who = sandbox.uids.of(work) if sandbox.uids else sandbox.run_as
        if who is not None:
            await asyncio.to_thread(chown_tree, work, who)
        place = Place(work, writable=True, run_as=who, prepared=outcome.prepared())
        done = await sandbox.run(
            test,
            place=place,
            env=agent_env(env, sandbox=sandbox),
            timeout_s=TEST_TIMEOUT_S,
            cap=100_000,
        )
        return done.returncode, done.output.text().splitlines()[-TAIL_LINES:]
    finally:
        if sandbox.uids is not None:
            sandbox.uids.forget(work)
        await asyncio.to_thread(shutil.rmtree, folder, True)


async def _suggestion(repo: Path) -> list[str]:
    _, listing = await user_git(repo, "ls-tree", "-r", "--name-only", "--full-tree", "HEAD")
    names = frozenset(listing.splitlines())
    texts: dict[str, str | None] = {}
    for name in ("pyproject.toml", "package.json"):
        if name in names:
            code, text = await user_git(repo, "show", f"HEAD:{name}", check=False)
            texts[name] = text if code == 0 else None
    found = suggest(names, texts.get)
    lines = [
        "setup: none in .teaparty/project.yaml at HEAD: agents get only the host's tools, "
        "with the network off"
    ]
    if found is None:
        return [
            *lines,
            "suggestion: none (no manifest this doctor knows: pyproject.toml, "
            "requirements*.txt, package.json, Cargo.toml, go.mod)",
        ]
    lines.append("suggested, for .teaparty/project.yaml (review it; nothing was run):")
    text = yaml.safe_dump({"setup": dict(found.setup)}, sort_keys=False, width=100)
    lines += [f"  {line}" for line in text.splitlines()]
    lines += [f"  # {why}" for why in found.because]
    return lines
