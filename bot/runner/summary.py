"""A runner's step summary (`GITHUB_STEP_SUMMARY`): each job's summary, the same the check run
on its pull request carries (bot/github/job_summary.py), and, where its project turns them on
(`runner: {summary_transcripts: true}`), each conversation's transcript folded (`<details>`).

A public repository's run summaries are public, so transcripts are off by default. GitHub
keeps at most 1 MiB of one step's summary; this writes at most `BUDGET`, well under it. The
job summaries are kept whole; transcripts fill what is left in the order of the hierarchy,
and where one no longer fits they stop, with a note saying what was left out. Everything
agents wrote has the secrets the run holds masked, then goes through `Outbound`, as all the
App posts; each message is cut at `MESSAGE_CHARS`.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.github.job_summary import summary_lines
from bot.github.outbound import Outbound, code_block
from bot.github.sanitizer import sanitize
from orchestrator.api import JobStatus, JobViews, Level, Message, job_page, shipped_org_dir

STEP_SUMMARY_LIMIT = 1024 * 1024  # GitHub's limit for one step's summary, in bytes
BUDGET = 512 * 1024  # what a run writes: half of it, for what other steps add
MESSAGE_CHARS = 4_000  # of one message's text, in a transcript
ARGS_CHARS = 600  # of one tool call's arguments
Redact = Callable[[str], str]
TRANSCRIPTS_OFF = (
    "Transcripts are not shown here: a public repository's run summaries are public. "
    "`runner: {summary_transcripts: true}` in `.teaparty/project.yaml` folds them in."
)


@dataclass(frozen=True)
class Conversation:
    """One conversation of a job, where it sits in the hierarchy, and its messages."""

    level: Level
    messages: tuple[Message, ...]


Transcripts = Mapping[int, tuple[Conversation, ...]]  # by job: only where the project shows them


async def read_transcripts(
    home: Path, job_ids: Sequence[int], *, org_dir: Path | None = None
) -> dict[int, tuple[Conversation, ...]]:
    """The conversations of each job in `job_ids`, with their messages, from the store under
    `home` (read beside whoever holds it): the hierarchy once, then every message at once."""
    found: dict[int, tuple[Conversation, ...]] = {}
    async with JobViews.open(home, org_dir=org_dir or shipped_org_dir()) as views:
        for job_id in job_ids:
            page = await job_page(views, job_id)
            said: dict[str, list[Message]] = {}
            for entry in await views.log(job_id):
                said.setdefault(entry.message.conversation_id, []).append(entry.message)
            found[job_id] = tuple(
                Conversation(level, tuple(said.get(level.conversation_id, ())))
                for level in page.levels
            )
    return found


def jobs_summary(
    jobs: Sequence[JobStatus],
    transcripts: Transcripts,
    *,
    agent: Outbound,
    redact: Redact,
    budget: int = BUDGET,
) -> list[str]:
    """Each job's summary, then (where shown) its transcripts, within `budget` bytes."""
    parts = [_job(status, agent) for status in jobs]
    left = budget - sum(_size(part) for part in parts)
    lines: list[str] = []
    for status, part in zip(jobs, parts, strict=True):
        lines += part
        conversations = transcripts.get(status.job_id)
        if conversations is None:
            lines += [TRANSCRIPTS_OFF, ""]
            continue
        folded, left = _transcripts(conversations, agent=agent, redact=redact, budget=left)
        lines += folded
    return lines


def _job(status: JobStatus, agent: Outbound) -> list[str]:
    title = agent.inline(status.title, limit=200)
    head = f"### Job {status.job_id}: {title}"
    return [head, "", *summary_lines(status, agent=agent, page_url=None), ""]


def _transcripts(
    conversations: tuple[Conversation, ...], *, agent: Outbound, redact: Redact, budget: int
) -> tuple[list[str], int]:
    """The job's transcripts, folded, as far as `budget` bytes go; the lines and what is left."""
    shown = sum(len(c.messages) for c in conversations)
    opening = [f"<details><summary>Transcripts ({len(conversations)} conversations)</summary>", ""]
    closing = ["</details>", ""]
    left = budget - _size(opening) - _size(closing) - 400  # 400: room for the note
    lines = list(opening)
    for index, conversation in enumerate(conversations):
        head = [f"<details><summary>{_name(conversation)}</summary>", ""]
        body: list[str] = []
        cost = _size(head) + _size(["</details>", ""])
        for number, message in enumerate(conversation.messages):
            said = _message(message, agent=agent, redact=redact)
            if cost + _size(said) > left:
                if body:
                    lines += [*head, *body, "</details>", ""]
                rest = conversation.messages[number:]
                later = conversations[index + 1 :]
                lines.append(_cut_note(len(rest) + sum(len(c.messages) for c in later), shown))
                return [*lines, "", *closing], 0
            body += said
            cost += _size(said)
        lines += [*head, *body, "</details>", ""]
        left -= cost
    return [*lines, *closing], left


def _name(conversation: Conversation) -> str:
    level = conversation.level
    task = f" · task #{level.task}" if level.task is not None else ""
    return html.escape(f"{level.agent}{task} · {level.messages} messages", quote=True)


def _message(message: Message, *, agent: Outbound, redact: Redact) -> list[str]:
    lines = [f"**#{message.seq} {html.escape(message.sender)} · {message.role}**", ""]
    text = redact(message.whole_text)
    if len(text) > MESSAGE_CHARS:
        text = text[:MESSAGE_CHARS] + f"\n\n… ({len(text) - MESSAGE_CHARS:,} characters cut)"
    if text.strip():
        lines += [agent.block(text), ""]
    for call in message.tool_calls:
        # masked before it is encoded: JSON escapes a secret's quote or backslash, and the
        # escaped text is no longer the secret's value
        encoded = json.dumps(_masked(dict(call.args), redact), ensure_ascii=False)
        args = redact(sanitize(encoded))[:ARGS_CHARS]
        lines += [f"→ {agent.inline(call.name)}", "", code_block(args, "json"), ""]
    return lines


def _masked(value: object, redact: Redact) -> object:
    """`value` (a tool call's arguments) with each string in it masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _masked(item, redact) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_masked(item, redact) for item in value]
    return value


def _cut_note(left_out: int, total: int) -> str:
    return (
        f"**Transcripts cut here:** {left_out:,} of {total:,} messages are left out, to keep "
        "this summary well under GitHub's 1 MiB limit for a step's summary. `teaparty jobs "
        "log` on the run's state shows them all."
    )


def _size(lines: list[str]) -> int:
    return sum(len(line.encode()) + 1 for line in lines)
