"""The command line's own help: every subcommand described, every option explained, a version."""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.cli import COMMANDS, build_parser, main
from bot.command_table import Command, Elsewhere, load

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def commands(
    parser: argparse.ArgumentParser, path: str = "teaparty"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (sub)command's parser under `parser`, with its command line."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, f"{path} {name}")


def undocumented(parser: argparse.ArgumentParser) -> list[str]:
    """The options, arguments and subcommands of one parser that have no help text."""
    missing = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            missing += [name for name in action.choices if not helps.get(name)]
        elif not action.help or action.help == argparse.SUPPRESS:
            missing.append("/".join(action.option_strings) or action.dest)
    return missing


def test_the_walk_reaches_every_subcommand() -> None:
    found = [path for path, _ in commands(build_parser())]
    for expected in ("teaparty serve", "teaparty config check", "teaparty app-manifest"):
        assert expected in found
    assert len(found) >= 8


def test_the_table_names_each_command_as_its_entry_does() -> None:
    """A command another module declares is listed under the name its entry gives it."""
    for command in COMMANDS:
        if isinstance(command, Elsewhere):
            entry = load(command.entry)
            assert isinstance(entry, Command)
            assert entry.name == command.name


def test_every_option_of_every_command_has_help() -> None:
    gaps = {
        path: missing
        for path, parser in commands(build_parser())
        if (missing := undocumented(parser))
    }
    assert gaps == {}


def test_every_command_has_a_description() -> None:
    bare = [path for path, parser in commands(build_parser()) if not parser.description]
    assert bare == []


def test_the_walk_sees_an_option_without_help() -> None:
    parser = argparse.ArgumentParser(description="d")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("path")
    subcommands = parser.add_subparsers()
    subcommands.add_parser("empty", help="", description="d")
    subcommands.add_parser("silent")
    assert undocumented(parser) == ["--quiet", "path", "empty", "silent"]
    assert [path for path, child in commands(parser) if not child.description] == [
        "teaparty silent"
    ]


def installed_version() -> str:
    return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out == f"teaparty {installed_version()}\n"


def test_version_from_the_console_script() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "--version"], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"teaparty {installed_version()}\n",
        "",
    )
