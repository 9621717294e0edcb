"""`teaparty run`: a local job from the terminal, with gates asked on the terminal.

Every run is a new job with its own id; `--resume ID` continues one. Exit codes: 0 the
job delivered its branch; 1 it failed, or ended without delivering (a rejected plan);
2 usage or configuration (a refused model key too); 3 environment (the store is in use by
another process, the model's API unreachable); 4 it
waits at a question nobody can answer here (no terminal, `--no-input`); 130 interrupted.
An interrupted or parked job is saved; the last line says how to continue it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from bot.errors import RUN_EXIT_CODES, SettingsError
from bot.interrupts import run_once_interruptible
from bot.local_forge import UnansweredGateError
from bot.local_run import LocalJob, run_local
from bot.pipes import ClosableOutput
from bot.progress import View, view_for
from bot.settings import setup_secret_names
from orchestrator.api import (
    ConfigError,
    Gate,
    JobCancelledError,
    ModelAuthError,
    ModelError,
    ModelKind,
    OrchestratorError,
    ResumeError,
    StoreLockedError,
    check_model,
    has_head,
    repository_top,
    shipped_org_dir,
    uncommitted,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_PARKED = 0, 1, 2, 3, 4
EXIT_INTERRUPTED = 130
EXIT_CODES = RUN_EXIT_CODES
IN_USE = (
    "a teaparty run or teaparty serve is using this state directory: wait for it to end, "
    "or give this run a state directory of its own with --home DIR"
)


class UsageError(Exception):
    """What the person asked for cannot be run as asked; the message says why."""


def run_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run the job the arguments describe; print its progress and outcome; the exit code."""
    try:
        request = _request(args, env)
    except UsageError as exc:
        return _fail(str(exc), EXIT_USAGE)
    try:
        asyncio.run(check_model(request.model, env))
    except KeyboardInterrupt:
        return _fail("interrupted. No job was started.", EXIT_INTERRUPTED)
    except ModelError as exc:  # refused: fix the key; unreachable: the network, later
        return _fail(str(exc), EXIT_USAGE if isinstance(exc, ModelAuthError) else EXIT_ENVIRONMENT)
    started: list[int] = []
    out = _closable_stdout(started)
    view = view_for(env, plain=args.plain)
    try:
        job = run_once_interruptible(_run(request, env, started, view, out))
    except KeyboardInterrupt:
        view.close()
        return _fail(
            f"interrupted. {_resume_line(started, request.repo, request.home)}", EXIT_INTERRUPTED
        )
    except (OrchestratorError, RuntimeError, EOFError) as exc:
        view.close()
        return _fail(*_outcome(exc, started, request))
    view.close()
    _report(job)
    return EXIT_OK if job.delivered else EXIT_FAILED


def _outcome(exc: Exception, started: list[int], request: Request) -> tuple[str, int]:
    """What to say of a run that stopped with `exc`, and its exit code."""
    repo, home = request.repo, request.home
    if isinstance(exc, UnansweredGateError):
        return _parked(exc, repo, home), EXIT_PARKED
    if isinstance(exc, EOFError):  # the input ran out at a question: the job waits there
        return f"{exc}. {_resume_line(started, repo, home)}", EXIT_PARKED
    if isinstance(exc, (ResumeError, ConfigError)):
        return str(exc), EXIT_USAGE
    if isinstance(exc, StoreLockedError):
        return f"{exc}\n  {IN_USE}", EXIT_ENVIRONMENT
    if isinstance(exc, JobCancelledError):  # `teaparty jobs cancel`, from another terminal
        return f"{exc}; it cannot be resumed", EXIT_FAILED
    if not started:
        return str(exc), EXIT_FAILED
    return f"{exc}\n  {_resume_line(started, repo, home)}", EXIT_FAILED


def _parked(exc: UnansweredGateError, repo: Path, home: Path) -> str:
    """A job waiting at a question nobody here could answer: the question's first line, and
    the two ways on (answer it from a shell, or resume at a terminal, which asks it)."""
    gate, job_id = exc.gate, exc.job_id
    question = gate.question.strip().splitlines()[0] if gate.question.strip() else ""
    answers = f" ({' or '.join(gate.options)})" if gate.options else ""
    return (
        f"job {job_id} waits at gate {gate.gate_id} ({gate.kind}): {question}\n"
        f"  answer it{answers}: teaparty jobs answer {job_id} ANSWER{home_option(home)}\n"
        f"  then continue it: {resume_command(job_id, repo, home)}\n"
        "  (or run that at a terminal without answering first: it asks the question there)"
    )


def _fail(message: str, code: int) -> int:
    lead = "\n" if code == EXIT_INTERRUPTED else "teaparty run: "
    print(f"{lead}{message}", file=sys.stderr)
    return code


class Request:
    """A run, checked: the repository's top level, the texts, where state lives, how gates
    are answered."""

    def __init__(self, args: argparse.Namespace, env: Mapping[str, str], repo: Path) -> None:
        self.repo = repo
        self.title: str = (args.title or "").strip()
        self.body = _body(args.body_file) or self.title
        self.resume: int | None = args.resume
        self.model: ModelKind = args.model or (
            "anthropic" if env.get("ANTHROPIC_API_KEY") else "scripted"
        )
        self.home = state_home(args.home, env)
        self.org_dir = org_dir(env)
        self.auto = "yes" if args.yes else None
        self.ask = not args.yes and not args.no_input and sys.stdin.isatty()
        self.setup_secrets: tuple[str, ...] = ()


def state_home(given: Path | None, env: Mapping[str, str]) -> Path:
    """The state directory: `--home`, else $TEAPARTY_HOME, else ~/.teaparty; absolute."""
    home = given or env.get("TEAPARTY_HOME") or default_home()
    return Path(home).expanduser().resolve()


def org_dir(env: Mapping[str, str]) -> Path:
    """The organisation directory: $TEAPARTY_CONFIG, else the shipped organisation."""
    return Path(env["TEAPARTY_CONFIG"]) if env.get("TEAPARTY_CONFIG") else shipped_org_dir()


def _request(args: argparse.Namespace, env: Mapping[str, str]) -> Request:
    if args.resume is None and not (args.title or "").strip():
        raise UsageError("a title is needed (--title TEXT), or --resume ID")
    if args.resume is not None and args.resume < 1:
        raise UsageError(f"--resume {args.resume}: job ids start at 1")
    if args.resume is not None and (args.title or args.body_file):
        given = "--title" if args.title else "--body-file"
        raise UsageError(
            f"{given} is for a new job; --resume {args.resume} continues that job as it was "
            "asked (leave out one or the other)"
        )
    repo = _top_level(args.repo or Path.cwd())
    request = Request(args, env, repo)
    try:
        request.setup_secrets = setup_secret_names(env)
    except SettingsError as exc:
        raise UsageError("; ".join(exc.problems)) from None
    if request.model == "anthropic" and not env.get("ANTHROPIC_API_KEY"):
        raise UsageError("--model anthropic needs ANTHROPIC_API_KEY in the environment")
    if request.model == "scripted":
        print("no ANTHROPIC_API_KEY: using the scripted stand-in for the model")
    return request


def _top_level(path: Path) -> Path:
    """The top level of the repository `path` is in; UsageError when it is none, or empty."""
    path = path.expanduser().resolve()
    if not path.is_dir():
        raise UsageError(f"{path} is not a directory")
    repo = asyncio.run(repository_top(path))
    if repo is None:
        raise UsageError(f"{path} is not a git repository")
    if not asyncio.run(has_head(repo)):
        raise UsageError(f"{repo} has no commits yet: a job starts from HEAD, so commit first")
    return repo


def _body(source: Path | None) -> str:
    """The issue text: from a file, or standard input for `-`; nothing when not given."""
    if source is None:
        return ""
    if str(source) == "-":
        return sys.stdin.read()
    try:
        return source.read_text()
    except OSError as exc:
        raise UsageError(f"--body-file {source}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise UsageError(f"--body-file {source}: not UTF-8 text") from None


def _closable_stdout(started: list[int]) -> ClosableOutput:
    """Standard output that, when its reader leaves, says so once and lets the job go on."""

    def note() -> str:
        job = f"job {started[0]}" if started else "the job"
        return (
            f"teaparty run: standard output was closed; {job} goes on, its outcome is the exit code"
        )

    if not isinstance(sys.stdout, ClosableOutput):
        sys.stdout = ClosableOutput(sys.stdout, note=note)
    return sys.stdout


async def _run(
    request: Request, env: Mapping[str, str], started: list[int], view: View, out: ClosableOutput
) -> LocalJob:
    await _warn_if_dirty(request.repo)

    async def approve(gate: Gate) -> str:
        if out.broken:  # nobody sees the question: the job waits there, saved
            raise EOFError("standard output closed while a question was open")
        with view.paused():
            return await _approve(gate)

    return await run_local(
        request.repo,
        title=request.title,
        body=request.body,
        home=request.home,
        org_dir=request.org_dir,
        model=request.model,
        env=env,
        setup_secrets=request.setup_secrets,
        approve=approve if request.ask else None,
        auto=request.auto,
        say=view.say,
        watch=view.update,
        resume=request.resume,
        on_job=started.append,
    )


async def _warn_if_dirty(repo: Path) -> None:
    """A job starts from HEAD: say what in the working tree it leaves out."""
    changed = await uncommitted(repo)
    if changed:
        shown = ", ".join(changed[:5]) + (
            f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        )
        print(f"note: the job starts from HEAD; not included: {shown}", file=sys.stderr)


async def _approve(gate: Gate) -> str:
    """Ask at the terminal until the answer is one of the gate's options (when it has some)."""
    hint = f" [{'/'.join(gate.options)}]" if gate.options else ""
    while True:
        answer = (await read_line(f"your answer{hint}: ")).strip()
        chosen = choose_option(gate.options, answer)
        if chosen is not None and gate.kind == "plan" and chosen == "no":
            return await _why_not()
        if chosen is not None:
            return chosen
        print(f"  please answer {' or '.join(gate.options) or 'with some text'}")


async def _why_not() -> str:
    """A rejected plan's answer: `no (what to change)`, which the lead plans again by, or
    `no` alone, which ends the job."""
    words = (await read_line("what should the lead change? (Enter alone ends the job): ")).strip()
    return f"no ({words})" if words else "no"


def choose_option(options: Sequence[str], answer: str) -> str | None:
    """The option `answer` names (itself in any case, or the one option it begins), any
    text where there are no options; None when it names none (or is empty)."""
    answer = answer.strip()
    if not options:
        return answer or None
    lowered = [option.lower() for option in options]
    if answer.lower() in lowered:
        return options[lowered.index(answer.lower())]
    matches = [o for o in options if o.lower().startswith(answer.lower())] if answer else []
    return matches[0] if len(matches) == 1 else None


async def read_line(prompt: str) -> str:
    """A line from standard input, read by the event loop (so Ctrl-C stops it at once)."""
    print(prompt, end="", flush=True)
    loop = asyncio.get_running_loop()
    got: asyncio.Future[str] = loop.create_future()
    fd = sys.stdin.fileno()

    def readable() -> None:
        if not got.done():
            got.set_result(os.read(fd, 65536).decode(errors="replace"))

    loop.add_reader(fd, readable)
    try:
        line = await got
    finally:
        with contextlib.suppress(Exception):
            loop.remove_reader(fd)
    if line == "":
        raise EOFError("standard input closed while a question was open")
    return line


def _resume_line(started: list[int], repo: Path, home: Path) -> str:
    if not started:
        return "No job was started."
    return f"Job {started[0]} is saved; continue it with: {resume_command(started[0], repo, home)}"


def resume_command(job_id: int, repo: Path | str, home: Path) -> str:
    """The command that continues job `job_id`, as it can be pasted into a shell: paths
    quoted, and the state directory named unless it is the default one."""
    return f"teaparty run --repo {shlex.quote(str(repo))} --resume {job_id}{home_option(home)}"


def home_option(home: Path) -> str:
    """` --home DIR` (quoted) for a state directory a fresh shell would not find by itself."""
    return "" if home == default_home() else f" --home {shlex.quote(str(home))}"


def default_home() -> Path:
    return (Path.home() / ".teaparty").resolve()


def _report(job: LocalJob) -> None:
    print(f"result: {job.result}")
    if job.delivered:
        print(f"branch {job.branch}:")
        for commit in job.commits:
            print(f"  {commit}")
    tokens = job.usage.input_tokens + job.usage.output_tokens
    print(
        f"tokens: {tokens:,} (cache read {job.usage.cache_read_tokens:,}); "
        f"cost: ${job.cost_usd:.4f}"
    )
