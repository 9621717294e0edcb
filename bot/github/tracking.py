"""What the bot writes on GitHub, rendered from engine state: pure text, no I/O.

Every comment carries a hidden marker (`<!-- teaparty:… -->`) so a retry or a restart
finds (by marker and author) and edits it instead of posting a second one. What agents
wrote (plan, step, result, errors, questions and options) goes through `Outbound` first:
the App's own words (the decider's mention, `Closes #N`) are composed around it.
"""

from __future__ import annotations

import re

from bot.github import checks_text
from bot.github.outbound import Outbound, code_block, code_span
from orchestrator.api import GATE_KINDS, Gate, GateKinds, JobStatus, ProxyDecision, Task

MARKER_PREFIX = "<!-- teaparty:"
SETUP_LOG_LIMIT = 2000
RESULT_LIMIT = 3000
_STATE_ICON = {
    "planning": "📝",
    "working": "🛠️",
    "waiting": "⏳",
    "delivering": "📦",
    "done": "✅",
    "failed": "⚠️",
    "cancelled": "🛑",
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


def tracking_body(
    status: JobStatus,
    *,
    branch_url: str | None,
    trigger_label: str,
    agent: Outbound,
    page_url: str | None = None,
) -> str:
    """The job's one tracking comment; `page_url`: its page on `teaparty serve`, if shown."""
    lines = [
        marker(f"job:{status.job_id}"),
        f"### {_STATE_ICON[status.state]} TeaParty job {status.job_id}: {status.state}",
        "",
        f"**Now:** {agent.inline(status.step)}",
        "",
    ]
    if page_url:
        lines += [f"**What the agents did:** [the job's page, live]({page_url})", ""]
    if status.tasks:
        lines += ["**Plan**", *(task_line(task, agent) for task in status.tasks), ""]
    branch = f"[`{status.branch}`]({branch_url})" if branch_url else f"`{status.branch}`"
    if status.branch:
        lines.append(f"**Branch:** {branch}")
    if status.link:
        lines.append(f"**Pull request:** {status.link}{_PULL_NOTE.get(status.pull or '', '')}")
    elif status.state == "done":
        lines.append("**Pull request:** none: the job changed nothing, so nothing was pushed")
    if status.rounds:
        lines += ["**Review rounds:**", *(f"- {agent.inline(r)}" for r in status.rounds)]
    lines += _held(status, agent)
    lines += _spend(status)
    lines += _where(status, agent)
    lines += checks_text.tracking_lines(status)
    lines += checks_text.ci_lines(status)
    if status.result and status.state in ("delivering", "done"):
        lines += ["", "**Result**", "", quote_block(agent.block(status.result[:RESULT_LIMIT]))]
    if status.error:
        lines += ["", "**Stopped:**", "", quote_block(agent.block(status.error[:RESULT_LIMIT]))]
    lines += ["", _footer(status, trigger_label)]
    return "\n".join(lines)


def _where(status: JobStatus, agent: Outbound) -> list[str]:
    """How the agents are confined, and the environment the repository's setup made."""
    lines = []
    if status.sandbox:
        warning = "⚠️ " if status.sandbox.startswith("OFF") else ""
        lines.append(f"**Sandbox:** {warning}{status.sandbox}")
    if status.setup:
        warning = "⚠️ " if status.setup_log is not None else ""
        lines.append(f"**Environment:** {warning}{agent.inline(status.setup)}")
    if status.setup_log is not None:
        tail = agent.block(status.setup_log[-SETUP_LOG_LIMIT:] or "(no output)")
        lines += ["", "<details><summary>End of the setup step's output</summary>", ""]
        lines += [quote_block(tail), "", "</details>"]
    return lines + refused_lines(status, agent)


REFUSED_SHOWN = 10


def refused_lines(status: JobStatus, agent: Outbound) -> list[str]:
    """What the sandbox refused the agents: destination, why, how often, who, which command."""
    if not status.refused:
        return []
    lines = [
        "**Network refused:** (the sandbox's egress filter; see `sandbox:` in the project file)"
    ]
    for refused in status.refused[:REFUSED_SHOWN]:
        times = f" ×{refused.count}" if refused.count > 1 else ""
        lines.append(
            f"- {code_span(f'{refused.host}:{refused.port}')} ({refused.reason}){times} · "
            f"{agent.inline(refused.caller)}: {code_span(refused.command)}"
        )
    if len(status.refused) > REFUSED_SHOWN:
        lines.append(f"- … and {len(status.refused) - REFUSED_SHOWN} more (`teaparty jobs show`)")
    return lines


def _spend(status: JobStatus) -> list[str]:
    """Tokens and cost so far, 80% of a cap when reached, and at the end, per level."""
    lines = [f"**Tokens:** {_tokens(status)} · **Cost so far:** ${status.cost_usd:.4f}"]
    if status.budget_note:
        lines.append(f"**Budget:** ⚠️ {status.budget_note}")
    if status.state == "done" and status.levels:
        lines += ["", *level_table(status)]
    return lines


_PULL_NOTE = {
    "draft": " (a draft)",
    "merged": " (merged)",
    "closed": " (closed without merging)",
    "gone": " (closed: its branch was deleted)",
}
DRAFT_HOLD = "(the pull request is a draft)"  # how a draft's hold names itself (paused_by)


def _footer(status: JobStatus, label: str) -> str:
    """The comment's last line: what can be done next."""
    if status.state == "cancelled":
        return "<sub>The job was cancelled: nothing more happens on it.</sub>"
    return _pull_footer(status, label) or (
        f"<sub>Edited in place as the job runs. To retry a stopped job, remove the "
        f"`{label}` label and add it again.</sub>"
    )


def _pull_footer(status: JobStatus, label: str) -> str | None:
    """What became of the job's pull request and what can be done next, once it is not open."""
    again = f"Removing the `{label}` label and adding it again starts a new job."
    if status.pull == "merged":
        return (
            "<sub>The pull request was merged: the job is finished, and its worktrees and "
            f"task branches are removed. {again}</sub>"
        )
    if status.pull == "closed":
        return (
            "<sub>The pull request was closed without merging; the job's work is kept. To "
            f"open it again, comment `/reopen` here while its branch `{status.branch}` "
            f"exists. {again}</sub>"
        )
    if status.pull == "gone":
        return f"<sub>The pull request's branch was deleted, so the job is closed. {again}</sub>"
    held = status.paused_by is not None and status.paused_by.endswith(DRAFT_HOLD)
    if status.pull == "draft" and not held and status.state not in ("done", "failed"):
        return "<sub>The pull request is a draft while the job works: ready at its end.</sub>"
    if status.pull == "draft":
        return "<sub>The pull request is a draft: review rounds wait until it is ready.</sub>"
    return None


def _held(status: JobStatus, agent: Outbound) -> list[str]:
    """What the job waits for, whether its decider holds it, and the direction they gave."""
    lines = [f"**Waiting:** {status.waiting}"] if status.waiting else []
    if status.paused_by and status.paused_by.endswith(DRAFT_HOLD):
        who = agent.inline(status.paused_by.removesuffix(DRAFT_HOLD).strip())
        lines.append(f"**Paused**: {who} made the pull request a draft; it resumes when ready.")
    elif status.paused_by:
        who = agent.inline(status.paused_by)
        lines.append(f"**Paused** by {who}: no new model calls until `/resume`.")
    if status.steering:
        lines += ["**Direction for the lead:**", *(f"- {agent.inline(t)}" for t in status.steering)]
    return lines


_REVIEW = {  # a task's review level (teams/board.py), as its mini-team has it
    "full": "review: spec and quality",
    "spec-only": "review: spec",
    "none": "no review",
}


def task_line(task: Task, agent: Outbound) -> str:
    """One task as a checklist line: number, title, state and review level."""
    box = "x" if task.state == "done" else " "
    blocked = task.state == "blocked" and task.blocked_reason
    note = f": {agent.inline(task.blocked_reason or '')}" if blocked else ""
    state = f"{_TASK_STATE[task.state]}{note}"
    return f"- [{box}] #{task.number} {agent.inline(task.title)} ({state}; {_REVIEW[task.review]})"


def _tokens(status: JobStatus) -> str:
    u = status.usage
    total = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    return (
        f"{total:,} (in {u.input_tokens:,}, out {u.output_tokens:,}, cache {u.cache_read_tokens:,})"
    )


_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
EDIT_GATE_TITLE = "the issue was edited: should the job work to the new text?"


def gate_body(
    gate: Gate,
    *,
    decider: str,
    agent: Outbound,
    suggestion: ProxyDecision | None = None,
    kinds: GateKinds = GATE_KINDS,
) -> str:
    """A gate's question as a new comment addressed to the decider (the App's one mention),
    with the proxy's prediction as a suggestion where it made one."""
    options = f"\n\nOptions: {', '.join(map(code_span, gate.options))}" if gate.options else ""
    asker = agent.inline(gate.asked_by.rsplit("/", 1)[-1])
    heading = f"from {asker}"
    how = "on a line of its own, or reply in words."
    if gate.engine_made:  # the engine's own rules ask it: its options are the commands
        title = EDIT_GATE_TITLE if _edit_diff(gate) is not None else None
        kind = kinds.get(gate.kind)
        heading = f"— {title or (kind.title if kind is not None else gate.kind)}"
        options, how = "", "on a line of its own."
    suggested = ""
    if suggestion is not None:
        suggested = (
            f"\n\n**The proxy suggests:** {code_span(agent.inline(suggestion.answer or ''))} "
            f"({proxy_figures(suggestion)}). It does not answer this one itself: "
            f"{agent.inline(suggestion.why)}.{_reasons(suggestion, agent)}"
        )
    asked = _asked(gate, agent)
    ask = (
        f"@{decider}, please answer with `/approve {gate.short_hash}`, `/reject <why>` or "
        f"`/revise <what>` {how}"
    )
    if gate.engine_made and gate.kind == "budget":
        ask = (
            f"@{decider}, `/approve {gate.short_hash}` raises the cap as proposed, "
            "`/budget <dollars>` sets another, `/reject` stops the job here (on a line of "
            "its own)."
        )
    if gate.engine_made and gate.kind == "merge-conflict":
        asked, answers = _merge_conflict(gate, agent)
        ask = f"@{decider}, please answer with {answers}"
    return (
        f"{marker(f'gate:{gate.gate_id}')}\n"
        f"**Question {gate.gate_id}** {heading} (`{gate.kind} {gate.short_hash}`):\n\n"
        f"{asked}{options}{suggested}{_pinned_head(gate)}\n\n{ask}"
    )


def _edit_diff(gate: Gate) -> str | None:
    """The difference an edit of the issue made, when the gate asks about one."""
    diff = gate.payload.get("diff") if gate.engine_made and gate.kind == "intent" else None
    return diff if isinstance(diff, str) and gate.question.endswith(diff) else None


def _asked(gate: Gate, agent: Outbound) -> str:
    """What the gate asks, quoted; an edit of the issue's difference as a `diff` block."""
    diff = _edit_diff(gate)
    if diff is None:
        return quote_block(agent.block(gate.question))
    said = gate.question.removesuffix(diff).rstrip()
    return f"{quote_block(agent.block(said))}\n\n{agent.block(code_block(diff, 'diff'))}"


def _pinned_head(gate: Gate) -> str:
    """For a protected-path or secret gate: what its approval pushes, and when it goes
    stale; for a secret gate over a value the App holds, that nothing pushes it."""
    head = str(gate.payload.get("head", ""))
    pinning = gate.kind in ("protected-path", "secret")
    if not pinning or not gate.engine_made or not _SHA.fullmatch(head):
        return ""
    if gate.kind == "secret" and gate.payload.get("values"):
        return (
            f"\n\nCommit `{head[:12]}` holds a secret value the App holds: no answer pushes "
            "it, and any answer ends the job with nothing pushed."
        )
    lines = " with the lines found as they are" if gate.kind == "secret" else ""
    return (
        f"\n\n`/approve {gate.short_hash}` approves exactly commit `{head[:12]}` ({head}): "
        f"the branch is pushed at that commit{lines} and nothing later. A new commit makes the "
        "approval stale and is asked about again; anything but an approval publishes nothing."
    )


CONFLICT_HUNKS_SHOWN = 1500  # characters of the hunks a merge-conflict gate shows


def _merge_conflict(gate: Gate, agent: Outbound) -> tuple[str, str]:
    """A merge-conflict gate, short: the task and its files, the hunks folded away; and what
    each answer does."""
    held = gate.payload
    task = held.get("task", "?")
    files = (
        ", ".join(code_span(str(f)) for f in held.get("files", ()))
        or "no file any more (it would merge cleanly now)"
    )
    hunks = str(held.get("hunks", "")).strip()
    if len(hunks) > CONFLICT_HUNKS_SHOWN:
        hunks = hunks[:CONFLICT_HUNKS_SHOWN].rstrip() + "\n… (trimmed)"
    fence = "`" * max(3, 1 + max((len(r) for r in re.findall(r"`+", hunks)), default=0))
    asked = (
        f"Task #{task} ({agent.inline(str(held.get('title', '')), limit=120)}) was approved "
        f"by its review, but its branch conflicts with the job branch in {files}."
    )
    if hunks:
        folded = f"{fence}\n{hunks}\n{fence}"
        asked += (
            f"\n\n<details><summary>The conflicting hunks</summary>\n\n"
            f"{agent.block(folded)}\n\n</details>"
        )
    answers = (
        f"`/approve {gate.short_hash}` to have it resolved (the lead makes a task that merges "
        f"both sides), `/reject <why>` to drop task #{task}, or `/revise <what>` to tell the "
        "lead what to do instead, on a line of its own."
    )
    return asked, answers


def clarify_body(key: str, text: str) -> str:
    """The App's short reply to one comment (a question it cannot tell, a stale approval)."""
    return f"{marker(key)}\n{text}"


def remind_body(key: str, gate: Gate, *, decider: str, days: float) -> str:
    """A reminder of a question left open (the App's one mention of the decider in it)."""
    return (
        f"{marker(key)}\n"
        f"@{decider}, question {gate.gate_id} (`{gate.kind} {gate.short_hash}`) has waited "
        f"{days:g} days for your answer; the job does nothing until it has one."
    )


def closed_body(key: str, gate: Gate, *, decider: str, days: float) -> str:
    """The job closed: a question went unanswered too long; how to take it up again."""
    return (
        f"{marker(key)}\n"
        f"⏸️ No answer to question {gate.gate_id} in {days:g} days, so this job is closed. "
        f"Its branch and work so far are kept. @{decider}, to take it up again, answer the "
        f"question and comment `/resume`."
    )


def proxy_body(gate: Gate, decision: ProxyDecision, *, decider: str, agent: Outbound) -> str:
    """The proxy's answer to a gate, said as the proxy's: answer, figures, reasons, override."""
    asker = agent.inline(gate.asked_by.rsplit("/", 1)[-1])
    answer = code_span(agent.inline(decision.answer or ""))
    return (
        f"{marker(f'proxy:{gate.gate_id}')}\n"
        f"🤖 **The proxy answered question {gate.gate_id}** from {asker} "
        f"(`{gate.kind} {gate.short_hash}`) for @{decider}: {answer}\n\n"
        f"{quote_block(agent.block(gate.question))}\n\n"
        f"This is TeaParty's proxy, not @{decider}. It answered because "
        f"{agent.inline(decision.why)} ({proxy_figures(decision)}).{_reasons(decision, agent)}"
        f"\n\nIf that is not your answer, reply `/override <your answer>`: the agent that asked "
        f"is told while the job runs, and the proxy goes back to asking you on "
        f"{agent.inline(gate.kind)} gates until it has earned it again."
    )


def proxy_figures(decision: ProxyDecision) -> str:
    """The proxy's numbers at a gate: stated and measured confidence, measured agreement."""
    stated = "?" if decision.confidence is None else f"{decision.confidence:.2f}"
    if decision.comparable == 0:  # an agreement over nothing is no figure
        return f"confidence {stated} stated; no earlier comparable decision to measure it against"
    measured = "unknown" if decision.measured is None else f"{decision.measured:.2f}"
    decisions = "decision" if decision.comparable == 1 else "decisions"
    return (
        f"confidence {stated} stated, {measured} measured at that level; agreement "
        f"{decision.agreement:.2f} over {decision.comparable} comparable {decisions}"
    )


def _reasons(decision: ProxyDecision, agent: Outbound) -> str:
    if not decision.reasons:
        return ""
    return f"\n\n**Its reasons:** {agent.inline(decision.reasons)}"


def refusal_body(login: str, *, label: str) -> str:
    """The one polite answer to someone who may not start a job."""
    return (
        f"{marker(f'refused:{login.lower()}')}\n"
        f"Thanks, @{login}. Only people with write access to this repository can start "
        f"TeaParty jobs, so the `{label}` label did nothing. A maintainer can add it."
    )


def failure_body(
    status: JobStatus, error: str, *, key: str, trigger_label: str, agent: Outbound
) -> str:
    """Says what stopped the job, that its branch is kept, and how to retry."""
    return (
        f"{marker(key)}\n"
        f"⚠️ TeaParty job {status.job_id} stopped:\n\n"
        f"{quote_block(agent.block(error[:RESULT_LIMIT]))}\n\n"
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


def no_sandbox_body(reason: str, *, label: str) -> str:
    """The job could not start: its agents have a shell and nothing here can confine it."""
    return (
        f"{marker('no-sandbox')}\n"
        "⚠️ TeaParty could not start this job: its agents run commands, and the App's host "
        "cannot sandbox them, so they do not run at all.\n\n"
        f"```\n{reason[:RESULT_LIMIT]}\n```\n\nThe App's operator can see why with "
        f"`teaparty doctor`. Once it is fixed, remove the `{label}` label and add it again."
    )


def pull_body(status: JobStatus, *, agent: Outbound) -> str:
    """The pull request's description: summary, tasks, cost, and the one issue it closes."""
    tasks = [task_line(task, agent) for task in status.tasks] or ["- (no tasks)"]
    return "\n".join(
        [
            marker(f"pull:{status.job_id}"),
            quote_block(agent.block((status.result or _unfinished(status))[:RESULT_LIMIT])),
            "",
            "**Tasks**",
            *tasks,
            "",
            *checks_text.pull_lines(status),
            *learned_lines(status, agent),
            f"**Tokens:** {_tokens(status)} · **Cost:** ${status.cost_usd:.4f}",
            "",
            *(level_table(status) + [""] if status.levels else []),
            f"Closes #{agent.number}",
        ]
    )


EARLY_DRAFT = (
    "A draft while the job works: its branch is pushed as each task merges, and the pull "
    "request is marked ready for review when the job is done."
)


def _unfinished(status: JobStatus) -> str:
    """What the description says without the job's result: done, or an early draft's note."""
    return "Done." if status.state in ("delivering", "done") else EARLY_DRAFT


def learned_lines(status: JobStatus, agent: Outbound) -> list[str]:
    """What the job learned, as its pull request proposes it (the lead's words, made safe)."""
    if not status.learned:
        return []
    return [
        "**What this job learned** (proposed in `.teaparty/learnings/` on this branch; kept "
        "for later tasks once this is merged; `/forget <id>` on an issue drops one):",
        *(f"- {code_span(item.entry_id)} {agent.inline(item.text)}" for item in status.learned),
        "",
    ]


def level_table(status: JobStatus) -> list[str]:
    """What each level of the organisation spent: tokens, cache hits and cost."""
    lines = ["| level | tokens | cache hits | cost |", "|---|---:|---:|---:|"]
    for level in status.levels:
        rate = level.cache_hit_rate
        hits = "–" if rate is None else f"{rate:.0%}"
        lines.append(f"| {level.level} | {level.tokens:,} | {hits} | ${level.usd:.4f} |")
    return lines


def quote_block(text: str) -> str:
    """Text as a Markdown quote: a code fence or HTML block in it ends where the quote ends."""
    return "\n".join(f"> {line}" if line else ">" for line in text.splitlines()) or ">"


def pull_gone_body(key: str, *, number: int, branch: str, label: str) -> str:
    """The job closed: its pull request's branch was deleted (GitHub closed the pull request)."""
    return (
        f"{marker(key)}\n"
        f"🛑 The branch `{branch}` of pull request #{number} was deleted, so GitHub closed the "
        f"pull request and this job is closed. Its work stays in the pull request's commits. "
        f"To start again, remove the `{label}` label and add it again."
    )
