"""`teaparty jobs`: see the jobs in a state directory, follow one, answer, cancel, clean up.

`list`, `show` and `log` read the store read-only, beside a running `teaparty serve` or
`teaparty run` and without its lock; a local job nothing runs is shown interrupted, with the
command that resumes it. `answer` and `clean` take the store (exit 3 while
another process holds it); `cancel` asks the process holding it to cancel, when one does.
Exit codes: 0 done, 1 no such job or the operation failed (or was declined), 2 usage,
3 environment (the store is in use, or of another teaparty version), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import os
import shlex
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from bot import jobs_json, jobs_text
from bot.command_table import HOME, JSON, Command, Option, fail
from bot.local import choose_option, org_dir, resume_command, state_home
from orchestrator.api import (
    STATE_FILTERS,
    ConfigError,
    Gate,
    JobNotFoundError,
    JobStateError,
    JobSummary,
    JobViews,
    LogEntry,
    OrchestratorError,
    Removal,
    StoreError,
    StoreLockedError,
    answer_job,
    cancel_job,
    clean,
    managing,
    plan_clean,
    run_scope,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
CANCEL_WAIT_S = 10.0
EXIT_CODES = (
    "exit codes: 0 done, 1 no such job, or the operation failed or was declined, 2 usage, "
    "3 environment (the store is in use by another teaparty process, or of another version), "
    "130 interrupted"
)


class UsageError(Exception):
    """What was asked cannot be done as asked; the message says why (exit 2)."""


HANDLER = "bot.jobs_cli:jobs_command"
JOB_ID = Option("job_id", type=int, metavar="ID", help="the job's id")


def _action(name: str, summary: str, *options: Option, job_id: bool = False) -> Command:
    """An action of `teaparty jobs`: --home and --json, then its job's ID if it takes one."""
    given = (JOB_ID, *options) if job_id else options
    return Command(
        name,
        help=summary,
        description=f"{summary}.",
        epilog=EXIT_CODES,
        options=(HOME, JSON, *given),
        handler=HANDLER,
    )


JOBS = Command(
    "jobs",
    help="list, show, follow, answer, cancel and clean up jobs",
    description="The jobs in a state directory (--home; default $TEAPARTY_HOME, else "
    "~/.teaparty), local and GitHub ones. Reading works while teaparty serve or a "
    "teaparty run holds the store. --json prints what docs/cli.md describes.",
    epilog=EXIT_CODES,
    actions=(
        _action(
            "list",
            "every job: id, repository/issue, state, gates, cost, age",
            Option("--state", choices=STATE_FILTERS, help="only jobs in this state"),
            Option("--repo", metavar="R", help="only jobs of R: owner/name, name or path"),
        ),
        _action("show", "one job: tasks, gates, cost, branch, last error", job_id=True),
        _action(
            "log",
            "a job's conversations, message by message",
            Option(
                "--follow",
                short="-f",
                action="store_true",
                help="keep printing until it ends (exit 1 when it is interrupted: nothing runs it)",
            ),
            job_id=True,
        ),
        _action(
            "answer",
            "answer a local job's open question",
            Option("text", metavar="TEXT", help="the answer (one of the options, if any)"),
            Option("--gate", type=int, metavar="G", help="which question, when several"),
            job_id=True,
        ),
        _action(
            "cancel",
            "end a job: questions closed, agents stopped",
            Option(
                "--wait",
                type=float,
                default=CANCEL_WAIT_S,
                metavar="SECONDS",
                help="while another teaparty holds the store, how long to wait for it to cancel "
                f"(default {CANCEL_WAIT_S:g}; the request stands after)",
            ),
            job_id=True,
        ),
        _action(
            "clean",
            "remove ended jobs' worktrees, unused mirrors, cancelled branches",
            Option("--yes", action="store_true", help="do not ask for confirmation"),
        ),
        _action(
            "view",
            "a job's page in the browser: its board, questions, and who did what, live",
            Option(
                "--no-open",
                dest="open",
                action="store_false",
                help="print the page's link only; do not start a browser",
            ),
            job_id=True,
        ),
    ),
)


def jobs_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run the `teaparty jobs` action `args.action` and return its exit code."""
    where = Where(state_home(args.home, environ), org_dir(environ), environ)
    command = ACTIONS[args.action]
    try:
        return asyncio.run(command(args, where))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `teaparty jobs log 3 | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED
    except UsageError as exc:
        return _fail(args, str(exc), EXIT_USAGE)
    except (JobNotFoundError, JobStateError) as exc:
        return _fail(args, str(exc), EXIT_FAILED)
    except ConfigError as exc:
        return _fail(args, f"the organisation's configuration: {exc}", EXIT_USAGE)
    except StoreError as exc:
        return _fail(args, str(exc), EXIT_ENVIRONMENT)
    except OrchestratorError as exc:
        return _fail(args, str(exc), EXIT_FAILED)


class Where:
    """The state directory and the organisation the jobs run under."""

    def __init__(self, home: Path, org: Path, env: Mapping[str, str] | None = None) -> None:
        self.home = home
        self.org = org
        self.env = env or {}  # what the viewer masks in what it shows

    def views(self) -> contextlib.AbstractAsyncContextManager[JobViews]:
        """The read-only views of the store."""
        return JobViews.open(self.home, org_dir=self.org)

    def has_store(self) -> bool:
        """Whether a store exists there yet."""
        return (self.home / "teaparty.db").is_file()

    def resume(self, summary: JobSummary) -> str | None:
        """The command that continues an interrupted job; None for any other."""
        if summary.state != "interrupted" or summary.origin.repository is None:
            return None
        repo = Path(summary.origin.repository)
        return resume_command(summary.job_id, repo, self.home)


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    return fail(f"teaparty jobs {args.action}", message, code, as_json=args.json)


def _out(args: argparse.Namespace, value: Any, lines: list[str]) -> None:
    if args.json:
        print(json.dumps(value, indent=2, ensure_ascii=False))
    else:
        sys.stdout.write(jobs_text.joined(lines))


def _repository(given: str | None) -> str | None:
    """`--repo` as jobs name it: an existing directory by its absolute path."""
    if given is None or not Path(given).expanduser().is_dir():
        return given
    return str(Path(given).expanduser().resolve())


async def _list(args: argparse.Namespace, where: Where) -> int:
    async with where.views() as views:
        found = await views.jobs(state=args.state, repo=_repository(args.repo))
    now = time.time()
    lines = jobs_text.table(found, now=now) if found else ["no jobs", *_demo_runs(where)]
    resumes = {s.job_id: where.resume(s) for s in found}
    lines += [jobs_text.interrupted(s, r) for s in found if (r := resumes[s.job_id])]
    _out(args, [jobs_json.summary(s, now=now, resume=resumes[s.job_id]) for s in found], lines)
    return EXIT_OK


def _demo_runs(where: Where) -> list[str]:
    """Where the jobs are when `--home` named the folder `teaparty demo --home` keeps its
    runs in (each run a state directory of its own)."""
    if where.has_store():
        return []
    runs = sorted(
        where.home.glob("run-*/teaparty/teaparty.db"),
        key=lambda db: (len(db.parent.parent.name), db.parent.parent.name),
    )
    if not runs:
        return []
    return [
        f"  {where.home} holds the demo's runs, each with its own state directory:",
        *(f"  teaparty jobs list --home {shlex.quote(str(db.parent))}" for db in runs),
    ]


async def _show(args: argparse.Namespace, where: Where) -> int:
    async with where.views() as views:
        job = await views.job(args.job_id)
    now = time.time()
    resume = where.resume(job.summary)
    _out(
        args,
        jobs_json.view(job, now=now, resume=resume),
        jobs_text.view(job, now=now, resume=resume),
    )
    return EXIT_OK


async def _log(args: argparse.Namespace, where: Where) -> int:
    transcript = jobs_text.Transcript(now=time.time())
    async with where.views() as views:
        entries = views.follow(args.job_id) if args.follow else _listed(views, args.job_id)
        async for entry in entries:
            if args.json:
                print(json.dumps(jobs_json.entry(entry), ensure_ascii=False), flush=True)
            else:
                sys.stdout.write(jobs_text.joined(transcript.lines(entry)))
                sys.stdout.flush()
        job = await views.job(args.job_id) if args.follow else None
    if job is not None and (resume := where.resume(job.summary)):  # nothing more will come
        print(jobs_text.interrupted(job.summary, resume), file=sys.stderr if args.json else None)
        return EXIT_FAILED
    if job is not None and not args.json:
        print(f"job {job.summary.job_id} {job.summary.state}: {job.summary.step}")
    return EXIT_OK


async def _listed(views: JobViews, job_id: int) -> AsyncIterator[LogEntry]:
    for entry in await views.log(job_id):
        yield entry


async def _answer(args: argparse.Namespace, where: Where) -> int:
    async with where.views() as views:
        job = await views.job(args.job_id)
    if job.summary.origin.forge == "github":
        origin = job.summary.origin
        raise JobStateError(
            f"job {args.job_id} is a GitHub job: its questions are answered on the issue, "
            f"{origin.repository}#{origin.issue}, by the decider's reply"
        )
    gate = _open_gate(job.gates, args.job_id, args.gate)
    chosen = choose_option(gate.options, args.text)
    if chosen is None:
        wanted = " or ".join(gate.options) or "some text"
        raise UsageError(f"gate {gate.gate_id} takes {wanted}, not {args.text!r}")
    try:
        answered = await answer_job(
            where.home, args.job_id, gate.gate_id, text=chosen, org_dir=where.org
        )
    except StoreLockedError as exc:  # most likely the run asking this very question
        where_to = await _answered_there(where, args.job_id, gate.gate_id)
        raise StoreLockedError(f"{exc}: {where_to}") from None
    resume = resume_command(args.job_id, job.summary.origin.repository or "", where.home)
    lines = [
        f"gate {answered.gate_id} of job {args.job_id} answered as {answered.answered_by}: "
        f"{answered.answer}",
        f"  the job goes on with: {resume}",
    ]
    value = {"job": args.job_id, "gate": answered.gate_id, "answer": answered.answer,
             "answered_by": answered.answered_by}  # fmt: skip
    _out(args, value, lines)
    return EXIT_OK


async def _answered_there(where: Where, job_id: int, gate_id: int) -> str:
    """Where a question is answered while another process holds the store."""
    async with where.views() as views:
        scope = views.holder()
    run = f"job {job_id}'s teaparty run"
    if scope == run_scope(job_id):
        return f"{run} is asking it: answer gate {gate_id} at that run's terminal"
    if scope == "":  # a teaparty serve, or a teaparty that does not say
        return f"if it is {run}, answer gate {gate_id} at its terminal; else here once it ends"
    if scope is None:
        return "it has just let go of it: try again"
    return "it is another job's teaparty run: answer here once it ends"


def _open_gate(gates: Sequence[Gate], job_id: int, wanted: int | None) -> Gate:
    open_gates = [g for g in gates if g.answer is None and g.closed_at is None]
    if wanted is not None:
        found = [g for g in open_gates if g.gate_id == wanted]
        if not found:
            raise JobStateError(f"gate {wanted} is not an open question of job {job_id}")
        return found[0]
    if not open_gates:
        raise JobStateError(f"job {job_id} has no open question")
    if len(open_gates) > 1:
        ids = ", ".join(str(g.gate_id) for g in open_gates)
        raise UsageError(f"job {job_id} has {len(open_gates)} open questions ({ids}): --gate G")
    return open_gates[0]


async def _cancel(args: argparse.Namespace, where: Where) -> int:
    by = f"{getpass.getuser()} (teaparty jobs cancel)"
    if args.wait < 0:
        raise UsageError(f"--wait {args.wait:g}: seconds, at least 0")
    outcome = await cancel_job(where.home, args.job_id, org_dir=where.org, by=by, wait_s=args.wait)
    row = outcome.command
    if row.state == "failed":
        raise JobStateError(row.outcome or "the cancel failed")
    if row.state == "pending":
        line = (
            f"job {args.job_id}: cancel requested (command {row.command_id}); the teaparty "
            "process holding the store carries it out on its next pass"
        )
    else:
        by_whom = "" if outcome.here else " (by the teaparty process holding the store)"
        line = f"{row.outcome}{by_whom}"
    lines = [line]
    if outcome.here and await _from_github(where, args.job_id):
        lines.append(
            "  note: no teaparty serve holds this store, so the issue's tracking comment was "
            "not updated"
        )
    _out(args, jobs_json.cancel(outcome), lines)
    return EXIT_OK


async def _from_github(where: Where, job_id: int) -> bool:
    async with where.views() as views:
        return (await views.job(job_id)).summary.origin.forge == "github"


async def _clean(args: argparse.Namespace, where: Where) -> int:
    if not args.yes and not sys.stdin.isatty():
        raise UsageError("nothing here can confirm (no terminal): add --yes to clean anyway")
    if not where.has_store():
        _out(args, {"removed": []}, ["nothing to clean"])
        return EXIT_OK
    async with managing(where.home, org_dir=where.org) as office:
        planned = await plan_clean(office)
        if not planned:
            _out(args, {"removed": []}, ["nothing to clean"])
            return EXIT_OK
        if not args.yes and not _confirm(planned):
            _out(args, {"removed": []}, ["nothing removed"])
            return EXIT_FAILED
        removed = await clean(office, planned)
    lines = [f"removed {jobs_text.removal(r)}" for r in removed]
    _out(args, {"removed": [jobs_json.removal(r) for r in removed]}, lines)
    return EXIT_OK


def _confirm(planned: Sequence[Removal]) -> bool:
    say = sys.stderr
    say.write(f"teaparty jobs clean would remove {len(planned)} thing(s):\n")
    say.write(jobs_text.joined(f"  {jobs_text.removal(r)}" for r in planned))
    say.write("remove them? [y/N] ")
    say.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


Action = Callable[[argparse.Namespace, Where], Coroutine[Any, Any, int]]


async def _view(args: argparse.Namespace, where: Where) -> int:
    from bot.job_viewer import view  # the web server's modules only for this action

    async with where.views() as views:
        await views.job(args.job_id)  # JobNotFoundError before anything is served
    return await view(args.job_id, home=where.home, org_dir=where.org, env=where.env,
                      open_browser=args.open)  # fmt: skip


ACTIONS: dict[str, Action] = {
    "list": _list,
    "show": _show,
    "log": _log,
    "answer": _answer,
    "cancel": _cancel,
    "clean": _clean,
    "view": _view,
}
