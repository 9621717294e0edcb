"""`teaparty config check`: configuration checked before the App or a run reads it.

With no path it checks what a run from here would read: the organisation and, inside a
repository, that repository's project file (a run refuses a bad one, exit 2).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bot.command_table import Command, Option

EXIT_OK, EXIT_ISSUES, EXIT_USAGE = 0, 1, 2
EXIT_CODES = "exit codes: 0 all is well, 1 issues found (each printed), 2 a path that is not there"
PROJECT_FILE = ".teaparty/project.yaml"

CONFIG = Command(
    "config",
    help="check the organisation and project configuration",
    description="Check configuration files before the App or a run reads them.",
    actions=(
        Command(
            "check",
            help="check organisations, repositories' project files, or single YAML files",
            description="PATH is an organisation directory (has teaparty.yaml), a repository "
            "(has .teaparty/project.yaml), a project.yaml, or one org, workgroup or agent "
            "file. Default: the organisation a run uses (./config if it has teaparty.yaml, "
            "else $TEAPARTY_CONFIG, else the shipped one) and, inside a repository, its "
            "project file.",
            epilog=EXIT_CODES,
            options=(
                Option(
                    "paths",
                    nargs="*",
                    type=Path,
                    metavar="PATH",
                    help="what to check (see above; several ok)",
                ),
                Option(
                    "--org",
                    type=Path,
                    metavar="DIR",
                    help="organisation that projects are checked against "
                    "(default: $TEAPARTY_CONFIG, else the shipped organisation)",
                ),
            ),
            handler="bot.config_cli:config_check_command",
        ),
    ),
)


def config_check_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """`teaparty config check`: check each path; exit 1 if any has issues, 2 if one is missing."""
    from orchestrator.api import check_path, shipped_org_dir

    org_dir: Path = args.org or _env_org(environ) or shipped_org_dir()
    paths: Sequence[Path] = args.paths or _default_paths(environ)
    for path in [*paths, *([args.org] if args.org else [])]:
        if not path.exists():
            print(f"teaparty config check: no such file or directory: {path}", file=sys.stderr)
            return EXIT_USAGE
    status = EXIT_OK
    for path in paths:
        report = check_path(path, org_dir=org_dir)
        for issue in report.issues:
            print(issue, file=sys.stderr)
        if report.issues:
            status = EXIT_ISSUES
        elif report.note:
            print(f"ok: {path} ({report.note})")
        else:
            counts = f"{_plural(report.workgroups, 'workgroup')}, {_plural(report.agents, 'agent')}"
            print(f"ok: {path} ({counts})")
        if not args.paths and _uncommitted(path):
            changed = path / PROJECT_FILE
            print(f"note: {changed} has uncommitted changes; a run reads the committed one")
    return status


def _env_org(environ: Mapping[str, str]) -> Path | None:
    value = environ.get("TEAPARTY_CONFIG", "")
    return Path(value) if value else None


def _default_paths(environ: Mapping[str, str]) -> list[Path]:
    """The organisation a run from here would use, and the repository here if any."""
    from orchestrator.api import shipped_org_dir

    local = Path("config")
    org = local if (local / "teaparty.yaml").is_file() else None
    paths = [org or _env_org(environ) or shipped_org_dir()]
    repository = _repository(Path.cwd())
    return [*paths, repository] if repository is not None else paths


def _repository(here: Path) -> Path | None:
    """The top level of the git repository `here` is in; None outside one."""
    from orchestrator.api import repository_top

    return asyncio.run(repository_top(here))


def _uncommitted(path: Path) -> bool:
    """Whether `path`, a repository, has a project file that differs from its HEAD's."""
    from orchestrator.api import uncommitted

    if not (path / ".git").exists() or not (path / PROJECT_FILE).is_file():
        return False
    changed = asyncio.run(uncommitted(path))  # an untracked folder is named, not its files
    return any(
        PROJECT_FILE == c or (c.endswith("/") and PROJECT_FILE.startswith(c)) for c in changed
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
