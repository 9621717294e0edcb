"""The `teaparty` command line: one subcommand per job, each a function returning an exit code."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from orchestrator.config import check_path, shipped_org_dir

Command = Callable[[argparse.Namespace], int]
EXIT_OK, EXIT_ISSUES, EXIT_USAGE = 0, 1, 2


def main(argv: list[str] | None = None) -> int:
    """Run the command line with ``argv`` (default: sys.argv[1:]) and return the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits on --help and on usage errors; we return instead
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    command: Command = args.command
    return command(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="teaparty", description="Hand GitHub issues to an organisation of AI agents."
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    _add_config(commands)
    return parser


def _add_config(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config = commands.add_parser("config", help="check the organisation and project configuration")
    actions = config.add_subparsers(title="actions", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="check organisations, repositories' project files, or single YAML files",
        description="PATH is an organisation directory (has teaparty.yaml), a repository "
        "(has .teaparty/project.yaml), a project.yaml, or one org, workgroup or agent file. "
        "Default: ./config if it has teaparty.yaml, else $TEAPARTY_CONFIG, else the shipped "
        "organisation.",
    )
    check.add_argument("paths", nargs="*", type=Path, metavar="PATH")
    check.add_argument(
        "--org",
        type=Path,
        metavar="DIR",
        help="organisation that projects are checked against "
        "(default: $TEAPARTY_CONFIG, else the shipped organisation)",
    )
    check.set_defaults(command=_config_check)


def _config_check(args: argparse.Namespace) -> int:
    environ: Mapping[str, str] = os.environ
    org_dir: Path = args.org or _env_org(environ) or shipped_org_dir()
    paths: Sequence[Path] = args.paths or [_default_path(environ)]
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
        else:
            counts = f"{_plural(report.workgroups, 'workgroup')}, {_plural(report.agents, 'agent')}"
            print(f"ok: {path} ({counts})")
    return status


def _env_org(environ: Mapping[str, str]) -> Path | None:
    value = environ.get("TEAPARTY_CONFIG", "")
    return Path(value) if value else None


def _default_path(environ: Mapping[str, str]) -> Path:
    local = Path("config")
    if (local / "teaparty.yaml").is_file():
        return local
    return _env_org(environ) or shipped_org_dir()


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


if __name__ == "__main__":
    raise SystemExit(main())
