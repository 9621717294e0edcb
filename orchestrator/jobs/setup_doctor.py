"""`teaparty doctor --repo PATH`: what the repository's setup would do, a suggestion where it
has none, and its test command run once in the sandbox, in the prepared environment.

The setup is read as a job reads it (the project file at HEAD, committed) and prepared in
the state directory's cache exactly as a job of that repository would (`teaparty run` on
it then reuses it). The test command runs in a fresh checkout of HEAD's files, as an agent
of a task would run it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from orchestrator.config.schema import Organisation, Project, SetupSettings
from orchestrator.core.ecosystems import PRESETS
from orchestrator.core.secrecy import KnownSecrets
from orchestrator.core.secret_scan import Scanner
from orchestrator.jobs.local_repo import local_repository, read_project, user_git
from orchestrator.sandbox.confine import NO_NETWORK, Sandbox
from orchestrator.setup.cache import SetupCache, bound_from_env
from orchestrator.setup.checks import Checker, CommandRun
from orchestrator.setup.prepare import Outcome, Preparer, cache_key
from orchestrator.setup.suggest import suggest
from orchestrator.workspace.instructions import read_instructions

TEST_TIMEOUT_S = 900.0
TAIL_LINES = 20


@dataclass(frozen=True)
class Verdict:
    """What doctor says of a repository's setup: its lines, and whether all is well."""

    lines: tuple[str, ...]
    ok: bool


async def _instructions(git_dir: Path, head: str, project: Project) -> list[str]:
    """What the repository's instruction files give agents (workspace/instructions.py)."""
    settings = project.instructions
    if not settings.read:
        return ["instructions for agents: not read (`instructions: off`)"]
    found = await read_instructions(git_dir, head, extra=settings.files)
    wide = ", ".join(i.path for i in found.wide()) or "none"
    lines = [f"instructions for agents: {wide} (every agent of the project)"]
    lines += [
        f"  {i.path}: for {i.folder + '/' if i.folder else ', '.join(i.applies)}"
        for i in found.found
        if not i.wide
    ]
    lines += [f"  not read: {why}" for why in found.skipped]
    return lines


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
    lines += await _instructions(Path(git_dir), head, project)
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
    if not setup.checks():
        lines.append("test: no `setup.test` to run")
        return Verdict(tuple(lines), outcome.ok)
    checker = Checker(
        sandbox,
        home / "doctor",
        parent_env=env,
        owner=lambda path: sandbox.uids.of(path) if sandbox.uids else sandbox.run_as,
        forget=sandbox.uids.forget if sandbox.uids else lambda _: None,
        mask=lambda text: Scanner(known.values()).redact(text),
    )
    checked = await checker.check(
        repo=Path(git_dir),
        commit=head,
        commands=setup.checks(),
        prepared=outcome.prepared(),
        network=NO_NETWORK,
        timeout_s=TEST_TIMEOUT_S,
    )
    for done in checked.runs:
        said = "passed (exit 0)" if done.status == "passed" else f"FAILED ({_ended(done)})"
        lines.append(f"{done.name} `{done.command}` in the sandbox ({sandbox.mode}): {said}")
        lines += [f"  | {line}" for line in done.tail.splitlines()[-TAIL_LINES:]]
    if not checked.runs:
        lines.append(f"checks: not run: {checked.reason}")
    return Verdict(tuple(lines), outcome.ok and checked.status == "passed")


def _ended(run: CommandRun) -> str:
    if run.exit_code is None:
        return run.reason or "timed out"
    return f"exit {run.exit_code}" + ("; " + run.reason if run.status == "not run" else "")


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
