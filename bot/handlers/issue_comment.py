"""issue_comment.created: the decider's reply answers the oldest open question of the issue's job.

The handler gathers the facts (the issue's job, what the App linked to it, its open
gates), `decide_comment` turns them into actions with no I/O, and the context performs
them. Anyone but the decider (whose login is compared case-insensitively) is not heard.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.github.forge import Subject
from bot.handlers.actions import Action, AnswerGate, Ignore, Outcome, job_key
from bot.handlers.app_context import AppContext
from bot.handlers.payloads import CommentAdded
from orchestrator.api import Gate, JobRecord

EMPTY_REPLY = "(empty reply)"


@dataclass(frozen=True)
class CommentFacts:
    """What deciding on a comment needs beyond the payload."""

    job: JobRecord | None = None  # the issue's job, if it ever had one
    subject: Subject | None = None  # what the App linked to it; None: the App did not start it
    gates: tuple[Gate, ...] = ()  # its unanswered questions, oldest first


async def on_issue_comment_created(command: CommentAdded, ctx: AppContext) -> Outcome:
    """Answer the issue's job's oldest open question with the decider's reply."""
    facts = await gather(command, ctx)
    actions = decide_comment(command, facts)
    return await ctx.perform(actions, repo=command.repo, number=command.issue.number)


async def gather(command: CommentAdded, ctx: AppContext) -> CommentFacts:
    """Read the issue's job, its link and its open gates from the store."""
    repo, records = command.repo, ctx.office.records
    job = await records.job_for_key(job_key(repo.owner, repo.name, command.issue.number))
    linked = None if job is None else await records.subject(job.job_id, "github")
    if job is None or linked is None:
        return CommentFacts(job)
    gates = await ctx.office.open_gates(job.job_id)
    return CommentFacts(job, Subject.from_json(linked), tuple(gates))


def decide_comment(command: CommentAdded, facts: CommentFacts) -> tuple[Action, ...]:
    """What to do about a new comment on an issue; performs no I/O."""
    job, subject, author = facts.job, facts.subject, command.author.login
    if job is None or subject is None:
        return (Ignore("no job on this issue"),)
    if not facts.gates:
        return (Ignore("the job has no open question", job.job_id),)
    if author.lower() != subject.decider.lower():
        return (Ignore(f"{author} is not the decider", job.job_id),)
    answer = command.body.strip() or EMPTY_REPLY
    return (AnswerGate(job.job_id, facts.gates[0].gate_id, answer, answered_by=author),)
