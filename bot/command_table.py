"""The command line as a table: each command, action and option a frozen entry, and the
argparse parsers built from them. Handlers and other modules' entries are named as
"module:attribute" and imported only when used, so that building one command's parser
loads nothing another command needs."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, replace
from pathlib import Path
from typing import Any, TypeAlias

SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
Handler = Callable[[argparse.Namespace, Mapping[str, str]], int]


class UsageProblem(Exception):
    """The command line does not parse: `message` as argparse words it, `parser` the
    (sub)command's parser, whose usage goes with it."""

    def __init__(self, parser: argparse.ArgumentParser, message: str) -> None:
        super().__init__(message)
        self.parser = parser
        self.message = message


class Parser(argparse.ArgumentParser):
    """An argparse parser (its subcommands' too) that raises UsageProblem instead of
    printing and exiting, so that the caller can answer in JSON when JSON was asked for."""

    def error(self, message: str) -> typing.NoReturn:
        raise UsageProblem(self, message)


def fail(command: str, message: str, code: int, *, as_json: bool = False) -> int:
    """Say why `command` failed on standard error and return `code`; with `as_json`, also
    print it on standard output as `{"error": {"command", "message", "exit_code"}}`, so a
    script reading the JSON it asked for finds the failure there."""
    print(f"{command}: {message}", file=sys.stderr)  # noqa: T201 - the command line's voice
    if as_json:
        failed_as_json(command, message, code)
    return code


def failed_as_json(command: str, message: str, code: int) -> None:
    failure = {"command": command, "message": message, "exit_code": code}
    print(json.dumps({"error": failure}, indent=2, ensure_ascii=False))  # noqa: T201


@dataclass(frozen=True)
class Option:
    """One option (`--name`) or positional argument (`name`), as argparse is told of it."""

    name: str
    _: KW_ONLY
    help: str
    short: str | None = None
    metavar: str | None = None
    type: Callable[[str], object] | None = None
    default: object = None
    choices: Sequence[str] | None = None
    action: str | None = None
    dest: str | None = None
    nargs: str | None = None

    def with_help(self, help: str) -> Option:
        """The same option, explained otherwise for one command."""
        return replace(self, help=help)

    def add_to(self, parser: argparse._ActionsContainer) -> None:
        """Declare this option on `parser` (or on a group of it)."""
        flags = (self.name,) if self.short is None else (self.name, self.short)
        given = {
            "metavar": self.metavar,
            "type": self.type,
            "default": self.default,
            "choices": self.choices,
            "action": self.action,
            "dest": self.dest,
            "nargs": self.nargs,
        }
        # Only what the entry sets: argparse's defaults differ by action (store_true's: False).
        keywords: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
        parser.add_argument(*flags, help=self.help, **keywords)


@dataclass(frozen=True)
class Exclusive:
    """Options of which at most one may be given; with `required`, exactly one."""

    options: tuple[Option, ...]
    _: KW_ONLY
    required: bool = False

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        """Declare the group and its options on `parser`."""
        group = parser.add_mutually_exclusive_group(required=self.required)
        for option in self.options:
            option.add_to(group)


@dataclass(frozen=True)
class Command:
    """A command or one of its actions: its texts, its options, and either its actions or
    the handler ("module:function", called with the arguments and the environment) that runs it."""

    name: str
    _: KW_ONLY
    help: str
    description: str
    epilog: str | None = None
    options: tuple[Option | Exclusive, ...] = ()
    actions: tuple[Command, ...] = ()
    handler: str = ""

    def add_to(self, commands: SubParsers) -> argparse.ArgumentParser:
        """Add this command's parser under `commands`, its actions' parsers under it."""
        parser = commands.add_parser(
            self.name, help=self.help, description=self.description, epilog=self.epilog
        )
        for option in self.options:
            option.add_to(parser)
        if self.actions:
            actions = parser.add_subparsers(title="actions", metavar="ACTION", required=True)
            for action in self.actions:
                action.add_to(actions).set_defaults(action=action.name)
        if self.handler:
            parser.set_defaults(command=self.handler)
        return parser


@dataclass(frozen=True)
class Elsewhere:
    """A command whose entry another module declares ("module:NAME"), imported only when
    that command's parser is built."""

    name: str
    entry: str

    def add_to(self, commands: SubParsers) -> argparse.ArgumentParser:
        """Import the entry and add its parser under `commands`."""
        command: Command = load(self.entry)
        return command.add_to(commands)


def load(reference: str) -> Any:
    """The attribute a "module:attribute" reference names, its module imported now."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


# The options several commands share, each declared here once.
HOME = Option(
    "--home",
    type=Path,
    metavar="DIR",
    help="the state directory (default: $TEAPARTY_HOME, else ~/.teaparty)",
)
JSON = Option("--json", action="store_true", help="print JSON (see docs/cli.md)")
MODEL = Option(
    "--model",
    choices=("scripted", "anthropic"),
    help="default: anthropic if ANTHROPIC_API_KEY is set, else the scripted stand-in",
)
PLAIN = Option(
    "--plain",
    action="store_true",
    help="one line per event instead of the live panel (the default when not a terminal)",
)
