"""How `teaparty jobs --json` prints jobs for scripts; the fields are documented in docs/cli.md.

Pure: views in, JSON-ready dicts out. Times are ISO 8601 in UTC; money is USD.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

from orchestrator.api import (
    Cancel,
    Gate,
    JobCommand,
    JobSummary,
    JobView,
    LogEntry,
    Removal,
    Task,
)


def iso(at: float | None) -> str | None:
    """`at` (epoch seconds) as ISO 8601 in UTC, e.g. 2025-11-25T14:05:01Z."""
    if at is None:
        return None
    stamp = datetime.datetime.fromtimestamp(at, tz=datetime.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def summary(job: JobSummary, *, now: float, resume: str | None = None) -> dict[str, Any]:
    """One job of `jobs list`; `resume`, the command that continues it when interrupted."""
    u = job.usage
    wait = job.waiting
    return {
        "id": job.job_id,
        "key": job.job_key,
        "origin": job.origin.forge,
        "repository": job.origin.repository,
        "issue": job.origin.issue,
        "title": job.title,
        "state": job.state,
        "step": job.step,
        "waiting": None
        if wait is None
        else {"kind": wait.kind, "reason": wait.reason, "since": iso(wait.since),
              "until": iso(wait.until)},
        "running": job.held,
        "resume": resume,
        "open_gates": job.open_gates,
        "cost_usd": job.cost_usd,
        "tokens": {"input": u.input_tokens, "output": u.output_tokens,
                   "cache_read": u.cache_read_tokens, "cache_write": u.cache_write_tokens},
        "created_at": iso(job.created_at),
        "updated_at": iso(job.updated_at),
        "age_seconds": round(now - job.created_at, 3),
    }  # fmt: skip


def view(job: JobView, *, now: float, resume: str | None = None) -> dict[str, Any]:
    """The tracking view of `jobs show`: a summary and the rest."""
    return summary(job.summary, now=now, resume=resume) | {
        "branch": job.branch,
        "worktree": job.worktree,
        "worktree_present": job.worktree_present,
        "result": job.result,
        "last_error": job.last_error,
        "tasks": [_task(t) for t in job.tasks],
        "gates": [_gate(g) for g in job.gates],
        "errors": [
            {"key": f.failure_key, "kind": f.kind, "reason": f.reason, "at": iso(f.failed_at)}
            for f in job.failures
        ],
        "commands": [command(c) for c in job.commands],
        "remembered": list(job.preferences),
        "checks": [{"task": c.task, **dataclasses.asdict(c.checked)} for c in job.checks],
        "network_refused": [
            {
                "host": r.host,
                "port": r.port,
                "why": r.why,
                "count": r.count,
                "agent": r.agent,
                "task": r.task,
                "command": r.command,
                "last_at": iso(r.last_at),
            }
            for r in job.refused
        ],  # fmt: skip
    }


def _task(task: Task) -> dict[str, Any]:
    return {
        "number": task.number,
        "title": task.title,
        "state": task.state,
        "workgroup": task.workgroup,
        "review": task.review,
        "blocked_by": list(task.blocked_by),
        "blocked_reason": task.blocked_reason,
        "result": task.result,
    }


def _gate(gate: Gate) -> dict[str, Any]:
    answered = gate.answer is not None
    return {
        "id": gate.gate_id,
        "kind": gate.kind,
        "state": "answered" if answered else "closed" if gate.closed_at else "open",
        "question": gate.question,
        "options": list(gate.options),
        "asked_by": gate.asked_by,
        "asked_at": iso(gate.asked_at),
        "answer": gate.answer,
        "answered_by": gate.answered_by,
        "answered_via": gate.answered_via,
        "answered_at": iso(gate.answered_at),
        "closed_at": iso(gate.closed_at),
    }


def command(row: JobCommand) -> dict[str, Any]:
    """A command for a job, as stored."""
    return {
        "id": row.command_id,
        "job": row.job_id,
        "kind": row.kind,
        "state": row.state,
        "requested_by": row.requested_by,
        "requested_at": iso(row.requested_at),
        "outcome": row.outcome,
        "finished_at": iso(row.finished_at),
    }


def cancel(outcome: Cancel) -> dict[str, Any]:
    """What `jobs cancel` did: the command, and who carried it out."""
    return command(outcome.command) | {"carried_out_here": outcome.here}


def entry(item: LogEntry) -> dict[str, Any]:
    """One message of `jobs log`, a line of JSON Lines."""
    m = item.message
    usage = m.usage
    return {
        "id": item.message_id,
        "at": iso(item.at),
        "conversation": m.conversation_id,
        "agent": item.agent,
        "sender": m.sender,
        "role": m.role,
        "kind": m.content.get("kind"),
        "text": m.text,
        "tool_calls": [{"id": c.call_id, "name": c.name, "args": dict(c.args)}
                       for c in m.tool_calls],
        "call_id": m.call_id if m.role == "tool" else None,
        "is_error": bool(m.content.get("is_error", False)),
        "usage": None
        if usage is None
        else {"input": usage.input_tokens, "output": usage.output_tokens,
              "cache_read": usage.cache_read_tokens, "cache_write": usage.cache_write_tokens},
    }  # fmt: skip


def removal(item: Removal) -> dict[str, Any]:
    """One thing `jobs clean` removed."""
    return {"kind": item.kind, "path": item.path, "job": item.job_id, "branch": item.branch}
