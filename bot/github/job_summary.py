"""The job's summary where people look beside its issue: the `TeaParty` check run on its pull
request (bot/github/job_check.py) and a runner's step summary (bot/runner/summary.py).

One renderer, made of the tracking comment's own parts (bot/github/tracking.py,
checks_text.py): the state and step, a link to the job's page when there is one, each task
with its review level, the review rounds, the questions asked and how each was answered,
the engine's checks, and what each level of the organisation spent. What agents wrote goes
through `Outbound`, as everywhere the App posts. Pure text, no I/O.
"""

from __future__ import annotations

from bot.github import checks_text
from bot.github.outbound import Outbound, code_span
from bot.github.tracking import level_table, task_line
from orchestrator.api import Gate, JobStatus

QUESTION_CHARS = 160  # of each question, in the summary
GATES_SHOWN = 20


def summary_lines(status: JobStatus, *, agent: Outbound, page_url: str | None) -> list[str]:
    """The job's summary, as Markdown lines."""
    lines = [f"**State:** {status.state} · **Now:** {agent.inline(status.step)}"]
    if page_url:
        lines.append(f"**Job page:** [job {status.job_id}]({page_url})")
    if status.link:
        lines.append(f"**Pull request:** {status.link}")
    lines.append("")
    if status.tasks:
        done = sum(t.state == "done" for t in status.tasks)
        lines += [f"**Tasks** ({done} of {len(status.tasks)} done)"]
        lines += [task_line(task, agent) for task in status.tasks] + [""]
    if status.rounds:
        lines += ["**Review rounds**", *(f"- {agent.inline(r)}" for r in status.rounds), ""]
    lines += gate_lines(status.gates, agent)
    checks = checks_text.tracking_lines(status)
    lines += [*checks, ""] if checks else []
    u = status.usage
    tokens = u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens
    lines.append(f"**Tokens:** {tokens:,} · **Cost:** ${status.cost_usd:.4f}")
    if status.levels:
        lines += ["", *level_table(status)]
    return lines


def gate_lines(gates: tuple[Gate, ...], agent: Outbound) -> list[str]:
    """The questions the job asked: what, and who answered (a person, the proxy) or not yet."""
    if not gates:
        return []
    lines = [f"**Questions** ({len(gates)})"]
    for gate in gates[-GATES_SHOWN:]:
        asked = agent.inline(gate.question, limit=QUESTION_CHARS)
        lines.append(f"- {gate.gate_id} {code_span(gate.kind)}: {asked} ({_answer(gate, agent)})")
    if len(gates) > GATES_SHOWN:
        lines.append(f"- … and {len(gates) - GATES_SHOWN} earlier (`teaparty jobs show`)")
    return [*lines, ""]


def _answer(gate: Gate, agent: Outbound) -> str:
    if gate.answer is None:
        return "closed unanswered" if gate.closed_at is not None else "open"
    who = "the proxy" if gate.answered_via == "proxy" else agent.inline(gate.answered_by or "?")
    return f"{code_span(agent.inline(gate.answer, limit=60))} by {who}"
