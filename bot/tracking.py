"""What the bot writes on GitHub, rendered from engine state: pure text, no I/O.

Every comment carries a hidden marker (`<!-- teaparty:… -->`) so a retry or a restart
finds and edits it instead of posting a second one, and so the bot never reads its own
comments as commands.
"""

from __future__ import annotations

from orchestrator.board import Task
from orchestrator.driver import JobStatus
from orchestrator.gates import Gate

MARKER_PREFIX = "<!-- teaparty:"
RESULT_LIMIT = 3000
_STATE_ICON = {
    "planning": "📝",
    "working": "🛠️",
    "waiting": "⏳",
    "delivering": "📦",
    "done": "✅",
    "failed": "⚠️",
}
_TASK_STATE = {
    "pending": "to do",
    "in_progress": "in progress",
    "in_review": "in review",
    "done": "done",
    "blocked": "blocked",
    "cancelled": "cancelled",
}


def marker(key: str) -> str:
    """The hidden marker of one bot comment, e.g. `<!-- teaparty:job:7 -->`."""
    return f"{MARKER_PREFIX}{key} -->"


def tracking_body(status: JobStatus, *, branch_url: str | None, trigger_label: str) -> str:
    """The job's one tracking comment."""
    lines = [
        marker(f"job:{status.job_id}"),
        f"### {_STATE_ICON[status.state]} TeaParty job {status.job_id}: {status.state}",
        "",
        f"**Now:** {status.step}",
        "",
    ]
    if status.tasks:
        lines += ["**Plan**", *(_task_line(task) for task in status.tasks), ""]
    branch = f"[`{status.branch}`]({branch_url})" if branch_url else f"`{status.branch}`"
    if status.branch:
        lines.append(f"**Branch:** {branch}")
    if status.link:
        lines.append(f"**Pull request:** {status.link}")
    lines.append(f"**Tokens:** {_tokens(status)} · **Cost so far:** ${status.cost_usd:.4f}")
    if status.result and status.state in ("delivering", "done"):
        lines += ["", "**Result**", "", quote_block(status.result[:RESULT_LIMIT])]
    if status.error:
        lines += ["", f"**Stopped:** {status.error[:RESULT_LIMIT]}"]
    lines += [
        "",
        f"<sub>Edited in place as the job runs. To retry a stopped job, remove the "
        f"`{trigger_label}` label and add it again.</sub>",
    ]
    return "\n".join(lines)


def _task_line(task: Task) -> str:
    box = "x" if task.state == "done" else " "
    note = f": {task.blocked_reason}" if task.state == "blocked" and task.blocked_reason else ""
    return f"- [{box}] #{task.number} {_inline(task.title)} ({_TASK_STATE[task.state]}{note})"


def _tokens(status: JobStatus) -> str:
    u = status.usage
    total = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    return (
        f"{total:,} (in {u.input_tokens:,}, out {u.output_tokens:,}, cache {u.cache_read_tokens:,})"
    )


def gate_body(gate: Gate, *, decider: str) -> str:
    """A gate's question as a new comment addressed to the decider."""
    options = f"\n\nOptions: {', '.join(f'`{o}`' for o in gate.options)}" if gate.options else ""
    asker = gate.asked_by.rsplit("/", 1)[-1]
    return (
        f"{marker(f'gate:{gate.gate_id}')}\n"
        f"**Question {gate.gate_id}** from {asker} ({gate.kind}):\n\n"
        f"{quote_block(gate.question)}{options}\n\n"
        f"@{decider}, please answer by replying to this issue."
    )


def refusal_body(login: str, *, label: str) -> str:
    """The one polite answer to someone who may not start a job."""
    return (
        f"{marker(f'refused:{login.lower()}')}\n"
        f"Thanks, @{login}. Only people with write access to this repository can start "
        f"TeaParty jobs, so the `{label}` label did nothing. A maintainer can add it."
    )


def failure_body(status: JobStatus, error: str, *, key: str, trigger_label: str) -> str:
    """Says what stopped the job, that its branch is kept, and how to retry."""
    return (
        f"{marker(key)}\n"
        f"⚠️ TeaParty job {status.job_id} stopped: {error[:RESULT_LIMIT]}\n\n"
        f"The job branch `{status.branch}` is kept and the work so far is saved. To retry, "
        f"remove the `{trigger_label}` label and add it again."
    )


def config_error_body(error: str, *, label: str) -> str:
    """The job could not start: the repository's configuration is broken."""
    return (
        f"{marker('config-error')}\n"
        f"⚠️ TeaParty could not start: `.teaparty/project.yaml` on the default branch is "
        f"not valid:\n\n```\n{error[:RESULT_LIMIT]}\n```\n\nFix it, then remove the "
        f"`{label}` label and add it again."
    )


def pull_body(status: JobStatus, *, number: int) -> str:
    """The pull request's description: summary, tasks, cost, and the issue it closes."""
    tasks = [_task_line(task) for task in status.tasks] or ["- (no tasks)"]
    return "\n".join(
        [
            marker(f"pull:{status.job_id}"),
            quote_block((status.result or "Done.")[:RESULT_LIMIT]),
            "",
            "**Tasks**",
            *tasks,
            "",
            f"**Tokens:** {_tokens(status)} · **Cost:** ${status.cost_usd:.4f}",
            "",
            f"Closes #{number}",
        ]
    )


def quote_block(text: str) -> str:
    """Text as a Markdown quote, with @mentions defused so agents' words ping nobody."""
    defused = text.replace("@", "@\u200b")
    return "\n".join(f"> {line}" if line else ">" for line in defused.splitlines()) or ">"


def _inline(text: str) -> str:
    return text.replace("\n", " ").replace("@", "@\u200b")
