"""What the tracking comment and the pull request say of the engine's checks: pure text.

A check's verdict, counts and reasons are the engine's words; the command is the project
file's and the end of a command's output is whatever the code under test printed, so both
go through the sanitiser (the output in a code block no line of it can end).
"""

from __future__ import annotations

from bot.github.outbound import code_block, code_span
from bot.github.sanitizer import sanitize
from orchestrator.api import Checked, CommandRun, JobCheck, JobStatus

TAIL_LIMIT = 2500  # characters of a command's output in a comment
_ICON = {"passed": "✅", "failed": "❌", "not run": "⚠️"}
_SAID = {"passed": "passed", "failed": "failed", "not run": "could not run"}


def tracking_lines(status: JobStatus) -> list[str]:
    """The comment's **Checks** section: each task's latest, then the job branch's."""
    if not status.checks:  # said once the work is done: nothing was there to check before
        if status.checks_missing and status.state in ("delivering", "done"):
            return [f"**Checks:** ⚠️ none ran: {status.checks_missing}"]
        return []
    lines = [
        "**Checks** (run by TeaParty in the sandbox, on each task's change and the job branch)"
    ]
    for check in status.checks:
        lines.append(f"- {_scope(check)} `{check.checked.commit[:12]}`: {_verdict(check.checked)}")
    failing = [c for c in status.checks if c.checked.status != "passed"][-1:]
    for check in failing:
        lines += _output(check.checked, f"{_scope(check)}: end of the output")
    return lines


def ci_lines(status: JobStatus) -> list[str]:
    """The comment's **CI** section: what the pull request's CI did to the job, newest first
    (the engine's words around check names CI's apps gave)."""
    if not status.ci:
        return []
    return ["**CI on the pull request**", *(f"- {sanitize(note)}" for note in status.ci)]


def pull_lines(status: JobStatus) -> list[str]:
    """The pull request's **Checks**: how the commit it carries fared, never silently."""
    head = next((c for c in reversed(status.checks) if c.task is None), None)
    if head is None:
        why = status.checks_missing or "no check of this commit was recorded"
        return [f"**Checks:** ⚠️ none ran: {why}. Nothing here was tested by TeaParty.", ""]
    checked = head.checked
    lines = [
        f"**Checks** (run by TeaParty in its sandbox on `{checked.commit[:12]}`, this pull "
        f"request's commit): {_ICON[checked.status]} {_SAID[checked.status]}"
    ]
    lines += [f"- {_run(run)}" for run in checked.runs] or [f"- {sanitize(checked.reason)}"]
    if checked.status == "not run":
        lines.append("- No check is reported as passed: the project's checks did not run.")
    return [*lines, *_output(checked, "End of the output"), ""]


def _scope(check: JobCheck) -> str:
    return "job branch" if check.task is None else f"task #{check.task}"


def _verdict(checked: Checked) -> str:
    said = f"{_ICON[checked.status]} {_SAID[checked.status]}"
    if not checked.runs:
        return f"{said} ({sanitize(checked.reason)})"
    return f"{said}: " + "; ".join(_run(run) for run in checked.runs)


def _run(run: CommandRun) -> str:
    detail = "; ".join(part for part in (run.counts, sanitize(run.reason)) if part)
    detail = f" ({detail})" if detail else ""
    said = _SAID[run.status]
    return f"{run.name} {code_span(run.command)} {said}{detail} in {run.seconds:.1f} s"


def _output(checked: Checked, title: str) -> list[str]:
    lines: list[str] = []
    for run in checked.runs:
        if run.status == "passed" or not run.tail:
            continue
        tail = sanitize(run.tail[-TAIL_LIMIT:])
        lines += ["", f"<details><summary>{title} of {run.name}</summary>", ""]
        lines += [code_block(tail), "", "</details>"]
    return lines
