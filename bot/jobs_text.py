"""How `teaparty jobs` prints jobs for people: a table, a tracking view, a transcript.

Pure text from the engine's views: no I/O. Everything agents or issue authors wrote is
printed with its control characters made visible, so no text can move the terminal's
cursor, recolour it or retitle its window.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Sequence
from typing import Any

from orchestrator.api import (
    Gate,
    JobCheck,
    JobCommand,
    JobSummary,
    JobView,
    LogEntry,
    Refused,
    Removal,
    Task,
)

ARGS_LIMIT = 300
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_WAITS = {"model": "the model is unavailable", "forge": "GitHub's rate limit"}


def printable(text: str) -> str:
    """`text` with control characters (escape sequences' start among them) shown as \\xNN."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def clock(at: float, *, now: float) -> str:
    """A time of day in UTC, with the date when it is not within a day of `now`."""
    shape = "%H:%M:%S UTC" if abs(at - now) < 86_400 else "%Y-%m-%d %H:%M UTC"
    return time.strftime(shape, time.gmtime(at))


def age(seconds: float) -> str:
    """A duration the way `ls` or `gh` shorten it: 45s, 12m, 3h, 2d."""
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{max(0, int(seconds))}s"


def cost(summary: JobSummary) -> str:
    """Dollars to four places, or `?` when the job could not be priced."""
    return "?" if summary.cost_usd is None else f"${summary.cost_usd:.4f}"


def where(summary: JobSummary) -> str:
    """The job's repository and issue, or its key when it names neither."""
    origin = summary.origin
    if origin.forge == "github":
        return f"{origin.repository}#{origin.issue}"
    return origin.repository or summary.job_key


def state(summary: JobSummary, *, now: float) -> str:
    """The state, with what it waits out and until when (or that it waits for a server)."""
    if unserved(summary):
        return f"{summary.state} (goes on when teaparty serve runs)"
    if summary.waiting is None:
        return summary.state
    what = _WAITS.get(summary.waiting.kind, summary.waiting.kind)
    return f"{summary.state} ({what}; again at {clock(summary.waiting.until, now=now)})"


def unserved(summary: JobSummary) -> bool:
    """Whether a GitHub job that has not ended waits for a `teaparty serve` to carry it on."""
    going = summary.state not in ("done", "failed", "cancelled")
    return going and not summary.held and summary.origin.forge == "github"


def interrupted(summary: JobSummary, resume: str) -> str:
    """What to say of an interrupted job: that nothing runs it, and how to go on."""
    return f"job {summary.job_id} is interrupted: nothing runs it; resume it with: {resume}"


def table(summaries: Sequence[JobSummary], *, now: float) -> list[str]:
    """One line per job under a header, columns aligned."""
    rows = [("ID", "REPOSITORY/ISSUE", "STATE", "GATES", "COST", "AGE", "TITLE")]
    rows += [
        (
            str(s.job_id),
            where(s),
            state(s, now=now),
            str(s.open_gates),
            cost(s),
            age(now - s.created_at),
            printable(s.title),
        )  # fmt: skip
        for s in summaries
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join([*(cell.ljust(w) for cell, w in zip(row, widths, strict=False)), row[-1]])
        for row in rows
    ]


def view(job: JobView, *, now: float, resume: str | None = None) -> list[str]:
    """The tracking view: the job's facts (with `resume`, the command that continues an
    interrupted job), then its tasks, gates, commands and result."""
    s = job.summary
    u = s.usage
    worktree = job.worktree and f"{job.worktree}{'' if job.worktree_present else ' (removed)'}"
    facts = [
        ("repository", f"{where(s)} ({s.origin.forge})"),
        ("state", state(s, now=now) + ("" if s.step == s.state else f": {printable(s.step)}")),
        *([("resume", resume)] if resume else []),
        ("open gates", str(s.open_gates)),
        ("branch", job.branch or "-"),
        ("worktree", worktree or "-"),
        ("cost", f"{cost(s)} ({u.total:,} tokens: {u.input_tokens:,} in, "
                 f"{u.output_tokens:,} out, {u.cache_read_tokens:,} cache read, "
                 f"{u.cache_write_tokens:,} cache write)"),
        ("created", f"{clock(s.created_at, now=now)} ({age(now - s.created_at)} ago)"),
        ("last error", printable(job.last_error) if job.last_error else "-"),
    ]  # fmt: skip
    lines = [f"job {s.job_id}: {printable(s.title)}"]
    lines += [f"  {name:<11} {value}" for name, value in facts]
    lines += _section("tasks", [_task(t) for t in job.tasks])
    lines += _section("gates", [line for g in job.gates for line in _gate(g, now=now)])
    lines += _section("commands", [_command(c, now=now) for c in job.commands])
    lines += _section("checks", [_check(c) for c in job.checks])
    lines += _section("remembered", [f"  {printable(text)}" for text in job.preferences])
    lines += _section("network refused", [_refused(r, now=now) for r in job.refused])
    if job.result:
        lines += _section("result", _indent(printable(job.result), 2))
    return lines


def _refused(refused: Refused, *, now: float) -> str:
    times = f" x{refused.count}" if refused.count > 1 else ""
    return (
        f"  {refused.host}:{refused.port} ({refused.reason}){times}, last "
        f"{clock(refused.last_at, now=now)}, {printable(refused.caller)}: "
        f"{printable(refused.command)}"
    )


def _section(title: str, lines: list[str]) -> list[str]:
    return [title, *lines] if lines else []


def _check(check: JobCheck) -> str:
    scope = "job branch" if check.task is None else f"task #{check.task}"
    checked = check.checked
    runs = "; ".join(printable(run.line()) for run in checked.runs) or printable(checked.reason)
    return f"  {scope} {checked.commit[:12]} [{checked.status}] {runs}"


def _task(task: Task) -> str:
    line = f"  #{task.number} [{task.state}] {printable(task.title)}"
    note = task.blocked_reason if task.state == "blocked" else task.result
    return f"{line} - {_first_line(note)}" if note else line


def _gate(gate: Gate, *, now: float) -> list[str]:
    options = f" [{'/'.join(gate.options)}]" if gate.options else ""
    asker = "the engine" if gate.engine_made else gate.asked_by
    asked = f"  #{gate.gate_id} {_gate_state(gate)}  {gate.kind}, asked by {asker}"
    lines = [f"{asked} at {clock(gate.asked_at, now=now)}"]
    lines += _indent(printable(gate.question) + options, 6)
    if gate.answer is not None:
        via = " (the proxy)" if gate.answered_via == "proxy" else ""
        lines.append(f"      answered by {gate.answered_by}{via}: {printable(gate.answer)}")
    return lines


def _gate_state(gate: Gate) -> str:
    if gate.answer is not None:
        return "answered"
    return "closed" if gate.closed_at is not None else "open"


def _command(command: JobCommand, *, now: float) -> str:
    asked = f"  #{command.command_id} {command.kind} by {command.requested_by}"
    outcome = f": {command.outcome}" if command.outcome else ""
    return f"{asked} at {clock(command.requested_at, now=now)}, {command.state}{outcome}"


class Transcript:
    """Prints a job's messages as they come, naming each tool result by the call it answers."""

    def __init__(self, *, now: float) -> None:
        self.now = now
        self._calls: dict[tuple[str, str], str] = {}

    def lines(self, entry: LogEntry) -> list[str]:
        """The lines of one message: who to whom, and what."""
        m = entry.message
        stamp = clock(entry.at, now=self.now)
        if m.role == "assistant":
            lines = [f"{stamp}  {entry.agent}"]
            lines += _indent(printable(m.text), 4) if m.text else []
            for call in m.tool_calls:
                self._calls[(m.conversation_id, call.call_id)] = call.name
                lines.append(f"    -> {call.name} {_args(call.args)}")
            return lines
        if m.role == "tool":
            name = self._calls.get((m.conversation_id, m.call_id or ""), "a call")
            error = ", an error" if m.content.get("is_error") else ""
            if m.sender == entry.agent:  # a tool the engine ran for it
                head = f"{stamp}  {entry.agent} <- {name}{error}"
            else:  # a reply to its Send, or a person's answer to its question
                head = f"{stamp}  {printable(m.sender)} -> {entry.agent}  [answers {name}{error}]"
        else:
            kind = str(m.content.get("kind", "message")).replace("_", " ")
            head = f"{stamp}  {printable(m.sender)} -> {entry.agent}  [{kind}]"
        return [head, *_indent(printable(m.text), 4)]


def _args(args: Any) -> str:
    text = printable(json.dumps(args, ensure_ascii=False, sort_keys=True))
    return text if len(text) <= ARGS_LIMIT else text[: ARGS_LIMIT - 1] + "…"


def removal(item: Removal) -> str:
    """One thing `clean` removes (or removed), for people."""
    job = f" (job {item.job_id})" if item.job_id is not None else ""
    if item.kind == "branch":
        return f"branch {item.branch} in {item.path}{job}"
    return f"{item.kind} {item.path}{job}"


def _indent(text: str, by: int) -> list[str]:
    return [" " * by + line for line in text.splitlines()] or [" " * by]


def _first_line(text: str | None) -> str:
    lines = printable(text or "").splitlines()
    return lines[0] + (" …" if len(lines) > 1 else "") if lines else ""


def joined(parts: Iterable[str]) -> str:
    """Lines as one text, ending in a newline."""
    return "".join(f"{part}\n" for part in parts)
