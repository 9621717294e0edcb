"""The `teaparty` command line: every command in one table (COMMANDS), each run by a handler
that returns an exit code."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from bot.command_table import (
    HOME,
    JSON,
    MODEL,
    PLAIN,
    Command,
    Elsewhere,
    Exclusive,
    Handler,
    Option,
    Parser,
    UsageProblem,
    failed_as_json,
    load,
)
from bot.errors import RUN_EXIT_CODES, SettingsError
from bot.secrets import take_secrets

DISTRIBUTION = "teaparty-github"
EXIT_USAGE, EXIT_INTERRUPTED = 2, 130
# bot.serve's exit codes; kept here so that `teaparty --help` need not import the server.
SERVE_EXIT_CODES = (
    "exit codes: 0 stopped by SIGTERM, 1 failed while running, 2 usage or configuration error "
    "(every problem is listed), 3 environment (the port is in use, the store is locked by "
    "another process), 130 interrupted (Ctrl-C)"
)

# Every command, in the order `teaparty --help` lists them.
COMMANDS: tuple[Command | Elsewhere, ...] = (
    Elsewhere("config", "bot.config_cli:CONFIG"),
    Command(
        "run",
        help="run a job on a local repository (no GitHub)",
        description="Plan and do one job on a local git repository: the result is a branch "
        "teaparty/job-N-<slug> with the work merged into it. Gate questions are asked here. "
        "Every run is a new job; --resume ID continues one.",
        epilog=RUN_EXIT_CODES,
        options=(
            Option(
                "--repo",
                type=Path,
                metavar="PATH",
                help="the repository, or any directory in it (default: the current directory)",
            ),
            Option("--title", metavar="TITLE", help="what the job is to do (its issue title)"),
            Option(
                "--body-file",
                type=Path,
                metavar="FILE",
                help="the issue text (- for standard input)",
            ),
            Option(
                "--resume",
                type=int,
                metavar="ID",
                help="continue job ID instead of starting a new one",
            ),
            MODEL,
            Option(
                "--yes",
                action="store_true",
                help="answer yes to every question, on the decider's behalf (no to raising the "
                "budget)",
            ),
            Option(
                "--no-input",
                action="store_true",
                help="ask nothing: a question stops the run (exit 4), the job saved at it",
            ),
            HOME,
            PLAIN,
        ),
        handler="bot.local:run_command",
    ),
    Elsewhere("jobs", "bot.jobs_cli:JOBS"),
    Command(
        "serve",
        help="run the GitHub App: receive webhooks, run jobs, open pull requests",
        description="Serve POST /webhook and GET /healthz. Configured by GITHUB_APP_ID, "
        "GITHUB_APP_PRIVATE_KEY (or GITHUB_APP_PRIVATE_KEY_PATH), GITHUB_WEBHOOK_SECRET, "
        "GITHUB_API_URL, GITHUB_SERVER_URL, TEAPARTY_HOME, TEAPARTY_CONFIG, "
        "TEAPARTY_ALLOWED_BOTS and ANTHROPIC_API_KEY (see the README). Every problem with "
        "them is listed at start. SIGTERM stops it gracefully.",
        epilog=SERVE_EXIT_CODES,
        options=(
            Option("--host", default="127.0.0.1", help="default: 127.0.0.1"),
            # Checked with the environment (bot.serve.configuration): all problems show at once.
            Option("--port", default="8000", metavar="PORT", help="1-65535 (default: 8000)"),
            HOME,
            MODEL,
        ),
        handler="bot.serve:serve_command",
    ),
    Command(
        "action",
        help="runner mode: apply one GitHub Actions event and drive its jobs",
        description="Apply the event of this workflow run (GITHUB_EVENT_NAME, "
        "GITHUB_EVENT_PATH, GITHUB_REPOSITORY, GITHUB_RUN_ID) with GITHUB_TOKEN, or as the "
        "App given GITHUB_APP_ID and GITHUB_APP_PRIVATE_KEY; drive its jobs until they park "
        "or end (TEAPARTY_TIMEOUT_MINUTES before the job's limit); write "
        "GITHUB_STEP_SUMMARY. Exit 0, or 1 with one line saying what failed.",
        options=(MODEL,),
        handler="bot.runner.command:action_command",
    ),
    Command(
        "demo",
        help="run the whole App loop offline: a local GitHub, an issue, a pull request",
        description="Start a local GitHub stand-in and teaparty serve on 127.0.0.1, label an "
        "issue, answer the App's questions as the maintainer, and show the pull request. "
        "Uses the scripted model unless ANTHROPIC_API_KEY is set.",
        options=(
            HOME.with_help(
                "keep the demo's state here, each run in a new run-N folder (its jobs: "
                "teaparty jobs list --home DIR/run-N/teaparty)"
            ),
            Option("--timeout", type=float, default=120.0, help="seconds (default 120)"),
            PLAIN,
        ),
        handler="bot.demo:demo_command",
    ),
    Command(
        "app-manifest",
        help="register the GitHub App from a manifest, then turn GitHub's code into settings",
        description="Print the App's manifest (the permissions and events the bot needs); with "
        "--html, also write a page whose button registers the App on GitHub. Then --convert "
        "CODE trades the code from GitHub's redirect for the App: it prints GITHUB_APP_ID, "
        "GITHUB_WEBHOOK_SECRET and GITHUB_APP_PRIVATE_KEY_PATH as .env lines and writes the "
        "key. GITHUB_SERVER_URL and GITHUB_API_URL select a GitHub Enterprise Server.",
        options=(
            Exclusive(
                (
                    Option("--webhook-url", metavar="URL", help="https://HOST/.../webhook"),
                    Option("--convert", metavar="CODE", help="the code from GitHub's redirect"),
                ),
                required=True,
            ),
            Option("--name", help="at most 34 characters (default: TeaParty)"),
            Option("--url", metavar="HOMEPAGE", help="default: https://github.com"),
            Option("--public", action="store_true", help="let any account install it"),
            Option(
                "--redirect-url",
                metavar="URL",
                help="where GitHub sends you with ?code= afterwards",
            ),
            Option("--html", type=Path, metavar="FILE", help="write the registration page"),
            Option("--org", metavar="ORG", help="register it under this organization"),
            Option("--key-file", type=Path, metavar="PATH", help="default: ./SLUG.private-key.pem"),
        ),
        handler="bot.manifest:app_manifest_command",
    ),
    Command(
        "doctor",
        help="say how agents' processes are sandboxed here, and what that guarantees",
        description="Probe bubblewrap and Landlock the way `teaparty serve` does at start, "
        "and print the mode in use (TEAPARTY_SANDBOX=bwrap|landlock|off forces one), what it "
        "guarantees and what it does not, and the state directory's permissions. Exit code 1 "
        "when agents' shells cannot be confined here.",
        options=(
            HOME,
            Option(
                "--repo",
                type=Path,
                metavar="PATH",
                help="also say what this repository's setup (its .teaparty/project.yaml at "
                "HEAD) does, or suggest one, then prepare it in the sandbox and run its test "
                "command once",
            ),
            Option(
                "--no-run",
                dest="run",
                action="store_false",
                help="with --repo: describe the setup only; prepare and test nothing",
            ),
        ),
        handler="bot.doctor:doctor_command",
    ),
    Command(
        "proxy",
        help="the human proxy's record",
        description="What the human proxy has predicted, answered and been overridden on, "
        "read from the state directory's store.",
        actions=(
            Command(
                "stats",
                help="per project, decider and kind of gate: decisions, agreement, autonomy",
                description="What the proxy predicted and how often the decider agreed, the "
                "answers it gave alone and the overrides, and whether it may answer alone now "
                "(or why not). docs/configuration.md says what each figure is.",
                options=(HOME, JSON.with_help("a JSON list, one object a group")),
                handler="bot.proxy_stats:proxy_stats_command",
            ),
        ),
    ),
    Elsewhere("learnings", "bot.learnings_cli:LEARNINGS"),
)


def entry() -> None:
    """The `teaparty` console script: secrets out of the process environment, then `main`."""
    try:
        environ = take_secrets(os.environ)
    except SettingsError as exc:
        print(f"teaparty: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    try:
        status = main(environ=environ)
    except KeyboardInterrupt:  # Ctrl-C before a command handles it itself (while importing)
        status = EXIT_INTERRUPTED
    raise SystemExit(status)


def main(argv: list[str] | None = None, *, environ: Mapping[str, str] | None = None) -> int:
    """Run the command line with ``argv`` (default: sys.argv[1:]) and return the exit code.

    `environ` is the environment the commands read (default: os.environ); `entry` passes
    one whose secrets are no longer in the process's own.
    """
    given = sys.argv[1:] if argv is None else argv
    parser = build_parser(only=given[0] if given else None)
    try:
        args = parser.parse_args(given)
    except SystemExit as exc:  # argparse exits on --help and --version; we return instead
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    except UsageProblem as problem:  # as argparse says it; in JSON too when JSON was asked for
        problem.parser.print_usage(sys.stderr)
        print(f"{problem.parser.prog}: error: {problem.message}", file=sys.stderr)
        if "--json" in given:
            failed_as_json(problem.parser.prog, problem.message, EXIT_USAGE)
        return EXIT_USAGE
    handler: Handler = load(args.command)  # its module is imported only now
    return handler(args, os.environ if environ is None else environ)


def build_parser(*, only: str | None = None) -> argparse.ArgumentParser:
    """The whole command line: every subcommand, option and help text; with `only` naming
    a command, that command alone, so that a command does not pay for loading what every
    other one needs (`teaparty action` on an event it ignores must not load the engine)."""
    parser: argparse.ArgumentParser = Parser(
        prog="teaparty", description="Hand GitHub issues to an organisation of AI agents."
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"teaparty {_version()}",
        help="print the version and exit",
    )
    commands = parser.add_subparsers(title="commands", metavar="COMMAND", required=True)
    named = [command for command in COMMANDS if command.name == only]
    for command in named or COMMANDS:
        command.add_to(commands)
    return parser


def _version() -> str:
    """The installed distribution's version (pyproject.toml's, once installed)."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # run from a source tree never installed
        return "(version unknown: not installed)"


if __name__ == "__main__":
    entry()
