"""issue_comment.created: the decider's reply answers the oldest open question of the issue's job.

The handler gathers the facts (the issue's job, what the App linked to it, its open
gates, whether this comment answered one already), `decide_comment` turns them into
actions with no I/O, and the context performs them. Anyone but the decider (whose login
is compared case-insensitively) is not heard. A comment answers a question posted before
it (GitHub's comment ids grow), and answers once: the same comment seen again (a webhook
and a catch-up pass, a redelivery) changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.github.forge import Subject
from bot.handlers.actions import Action, AnswerGate, Ignore, Later, Outcome, job_key
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
    answered: int | None = None  # the gate this comment answered already, if any


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
    answered = await ctx.office.answered_from(comment_ref(command.comment_id))
    return CommentFacts(job, Subject.from_json(linked), tuple(gates), answered)


def comment_ref(comment_id: int) -> str:
    """How the store names a GitHub comment that answered a gate."""
    return f"github:comment:{comment_id}"


def decide_comment(command: CommentAdded, facts: CommentFacts) -> tuple[Action, ...]:
    """What to do about a new comment on an issue; performs no I/O."""
    job, subject, author = facts.job, facts.subject, command.author.login
    if job is None or subject is None:
        return (Ignore("no job on this issue"),)
    if facts.answered is not None:
        return (Ignore(f"comment {command.comment_id} answered gate {facts.answered}", job.job_id),)
    if not facts.gates:
        return (Ignore("the job has no open question", job.job_id),)
    if author.lower() != subject.decider.lower():
        return (Ignore(f"{author} is not the decider", job.job_id),)
    asked = [gate for gate in facts.gates if _asked_before(gate, command.comment_id)]
    if not asked and any(gate.comment_ref is None for gate in facts.gates):
        return (Later(f"a question of job {job.job_id} is being posted"),)
    if not asked:
        return (Ignore("the comment came before the open question was posted", job.job_id),)
    answer = command.body.strip() or EMPTY_REPLY
    ref = comment_ref(command.comment_id)
    return (AnswerGate(job.job_id, asked[0].gate_id, answer, answered_by=author, ref=ref),)


def _asked_before(gate: Gate, comment_id: int) -> bool:
    """Whether the gate's comment was posted before comment `comment_id`."""
    ref = gate.comment_ref or ""
    return ref.isdigit() and int(ref) < comment_id
