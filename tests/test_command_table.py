"""The command line's table form: what each entry tells argparse, and what it leaves unsaid."""

from __future__ import annotations

import argparse

import pytest

from bot.command_table import HOME, Command, Elsewhere, Exclusive, Option

GREET = Command(
    "greet",
    help="say hello",
    description="Say hello.",
    actions=(
        Command(
            "once",
            help="one hello",
            description="One hello.",
            options=(
                Exclusive(
                    (
                        Option("--loud", action="store_true", help="shout"),
                        Option("--quiet", action="store_true", help="whisper"),
                    ),
                    required=True,
                ),
                Option("--times", short="-n", type=int, default=1, metavar="N", help="how often"),
                HOME.with_help("where to say it"),
            ),
            handler="greetings:once",
        ),
    ),
)


def parser_of(*commands: Command | Elsewhere) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="t")
    subcommands = parser.add_subparsers(required=True)
    for command in commands:
        command.add_to(subcommands)
    return parser


def test_an_action_carries_its_name_and_handler_and_only_the_keywords_it_sets() -> None:
    args = parser_of(GREET).parse_args(["greet", "once", "--loud", "-n", "3"])
    assert vars(args) == {
        "action": "once",
        "command": "greetings:once",
        "loud": True,
        "quiet": False,  # store_true's own default: the entry set none
        "times": 3,
        "home": None,
    }


def test_exclusive_options_refuse_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parser_of(GREET).parse_args(["greet", "once", "--loud", "--quiet"])
    assert "not allowed with argument --loud" in capsys.readouterr().err


def test_a_shared_option_explained_otherwise_keeps_the_rest() -> None:
    assert HOME.with_help("where to say it") == Option(
        "--home", type=HOME.type, metavar="DIR", help="where to say it"
    )


def test_an_entry_elsewhere_is_found_by_its_reference() -> None:
    elsewhere = Elsewhere("greet", f"{__name__}:GREET")
    parser = parser_of(elsewhere)
    assert parser.parse_args(["greet", "once", "--quiet"]).quiet is True
