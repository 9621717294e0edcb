"""issue_comment.created: a reply to the job's questions, read as D-A-I says.

The handler gathers the facts (the issue's job, what the App linked to it, its open gates,
whether this comment answered one already, and, when the comment could move a gate, the
author's access), `decide_comment` turns them into actions with no I/O, and the context
performs them. Only a gate's decider moves it, and only while GitHub says they still have
write access (if they lost it, a repository admin may answer in their place); an advisor's
words reach the asking agent as advice; anyone else's commands get 😕 and nothing more.

An answer names its gate by a hash (`/approve a1b2c3d`), by quoting the gate's comment, or
by being the only open question; anything else gets a clarifying comment, never a guess. A
hash that is not an open question's is stale: the App says so and what to approve now. A
comment answers a question posted before it (GitHub's comment ids grow), and answers once:
the same comment seen again (a webhook and a catch-up pass, a redelivery) changes nothing.
Edits and deletions are other events, so an answer once taken stays taken.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from bot.github.outbound import code_span
from bot.github.subject import Subject
from bot.github.tracking import clarify_body
from bot.handlers.actions import (
    Action,
    Advise,
    AnswerGate,
    Control,
    Ignore,
    Later,
    Outcome,
    Override,
    PostOnce,
    React,
    Reassign,
    job_key,
)
from bot.handlers.app_context import AppContext
from bot.handlers.commands import GATE_COMMANDS, Command, Reply, parse_reply
from bot.handlers.deliveries import CommentAdded
from bot.handlers.perform import perform
from bot.handlers.review import on_pull_comment
from orchestrator.api import GATE_KINDS, Gate, JobRecord, is_learning_id

EMPTY_REPLY = "(empty reply)"
WRITERS = ("admin", "write")
_YES = ("yes", "approve", "approved", "proceed", "ok")
_NO = ("no", "reject", "rejected", "stop")


@dataclass(frozen=True)
class CommentFacts:
    """What deciding on a comment needs beyond the payload."""

    job: JobRecord | None = None  # the issue's job, if it ever had one
    subject: Subject | None = None  # what the App linked to it; None: the App did not start it
    gates: tuple[Gate, ...] = ()  # its unanswered questions, oldest first
    answered: int | None = None  # the gate this comment answered already, if any
    advisors: frozenset[str] = frozenset()  # the project's advisors, casefolded
    author_access: str | None = None  # the author's permission, when it could move a gate
    decider_access: str | None = None  # the decider's, when an admin answers in their place
    proxied: tuple[int, ...] = ()  # gates the proxy answered alone, oldest first (/override)
    kinds: tuple[str, ...] = GATE_KINDS.names  # the gate kinds a quoted hash may name


async def on_issue_comment_created(command: CommentAdded, ctx: AppContext) -> Outcome:
    """Read the comment as an answer, advice or command for the issue's job's open gates;
    on a job's pull request, as review feedback (bot/handlers/review.py)."""
    if command.issue.is_pull_request:
        return await on_pull_comment(command, ctx)
    facts = await gather(command, ctx)
    actions = decide_comment(command, facts)
    return await perform(ctx, actions, repo=command.repo, number=command.issue.number)


async def gather(command: CommentAdded, ctx: AppContext) -> CommentFacts:
    """Read the issue's job, its link and its open gates from the store; ask GitHub for the
    author's access only when the comment could move a gate."""
    repo, records = command.repo, ctx.ports.records
    job = await records.latest_for_key(job_key(repo.owner, repo.name, command.issue.number))
    linked = None if job is None else await records.subject(job.job_id, "github")
    if job is None or linked is None:
        return CommentFacts(job)
    subject = Subject.from_json(linked)
    gates = tuple(await ctx.office.open_gates(job.job_id))
    answered = await ctx.office.answered_from(comment_ref(command.comment_id))
    project = ctx.office.project(job.project)
    advisors = frozenset(a.casefold() for a in project.humans.advisors) if project else frozenset()
    kinds = ctx.ports.gate_kinds.names
    facts = CommentFacts(job, subject, gates, answered, advisors, kinds=kinds)
    author = command.author.login.casefold()
    commands = bool(parse_reply(command.body).commands)
    if answered is not None or not (gates or commands) or author in advisors and not commands:
        return facts
    deciders = {_decider(gate, subject).casefold() for gate in gates} or {
        subject.decider.casefold()
    }
    if author not in deciders and not commands:
        return facts  # a bystander's words: nothing to check
    gh = await ctx.installation(repo)
    access = await gh.permission(repo.owner, repo.name, command.author.login)
    decider_access = None
    if author not in deciders and access == "admin":  # in place of a decider who left?
        decider = _decider(gates[0], subject) if gates else subject.decider
        decider_access = await gh.permission(repo.owner, repo.name, decider)
    proxied: tuple[int, ...] = ()
    if any(c.name == "override" for c in parse_reply(command.body).commands):
        proxied = tuple(d.gate_id for d in await ctx.ports.proxy.alone_answers(job.job_id))
    return CommentFacts(
        job, subject, gates, answered, advisors, access, decider_access, proxied, kinds
    )


def comment_ref(comment_id: int) -> str:
    """How the store names a GitHub comment that answered a gate."""
    return f"github:comment:{comment_id}"


def decide_comment(command: CommentAdded, facts: CommentFacts) -> tuple[Action, ...]:
    """What to do about a new comment on an issue; performs no I/O."""
    job, subject = facts.job, facts.subject
    if job is None or subject is None:
        return (Ignore("no job on this issue"),)
    if facts.answered is not None:
        return (Ignore(f"comment {command.comment_id} answered gate {facts.answered}", job.job_id),)
    reply = parse_reply(command.body, kinds=facts.kinds)
    overrides = [c for c in reply.commands if c.name == "override"]
    if overrides:
        return _override(command, facts, reply, overrides[0], job.job_id)
    if reply.job_commands and not reply.gate_commands:
        return _control(command, facts, reply.job_commands[0], job.job_id)
    if not facts.gates:
        if reply.gate_commands:
            return _clarify(command, job.job_id, "this job has no open question to answer.")
        return (Ignore("the job has no open question", job.job_id),)
    asked = tuple(gate for gate in facts.gates if _asked_before(gate, command.comment_id))
    if not asked and any(gate.comment_ref is None for gate in facts.gates):
        return (Later(f"a question of job {job.job_id} is being posted"),)
    if not asked:
        return (Ignore("the comment came before the open question was posted", job.job_id),)
    return _decide(command, facts, reply, asked, job.job_id)


def _decide(
    command: CommentAdded, facts: CommentFacts, reply: Reply, asked: tuple[Gate, ...], job_id: int
) -> tuple[Action, ...]:
    author = command.author.login
    target = _target(reply, asked)
    if isinstance(target, str):  # no gate, or more than one, fits what the comment names
        if any(_may_move(author, gate, facts) for gate in asked):
            return _clarify(command, job_id, target, asked)
        if reply.gate_commands:
            return (
                React("confused", comment_id=command.comment_id),
                Ignore(f"{author} may not answer job {job_id}'s questions", job_id),
            )
        return (Ignore(f"{author} is not the decider", job_id),)
    gate = target
    if not _may_move(author, gate, facts):
        return _not_theirs(command, facts, reply, gate, job_id)
    if reply.unknown and not reply.gate_commands:
        known = ", ".join(f"`/{name}`" for name in GATE_COMMANDS)
        return _clarify(command, job_id, f"{', '.join(reply.unknown)}: no such command ({known}).")
    first = reply.gate_commands[0] if reply.gate_commands else None
    return _answer(command, job_id, gate, first, reply.text)


def _answer(
    command: CommentAdded, job_id: int, gate: Gate, first: Command | None, text: str
) -> tuple[Action, ...]:
    """The decider's answer to `gate`: a command's meaning, or the reply's own words."""
    author, ref = command.author.login, comment_ref(command.comment_id)
    taken = React("+1", comment_id=command.comment_id)
    if first is None:
        answer = text or EMPTY_REPLY
    elif first.name == "decider":
        if first.login is None:
            return _clarify(command, job_id, "`/decider` needs a login: `/decider @someone`.")
        return (Reassign(job_id, gate.gate_id, first.login, by=author), taken)
    elif first.name == "approve":
        approval = _approval(command, job_id, gate, first)
        if not isinstance(approval, str):
            return approval
        answer = approval
    elif first.name == "reject":
        answer = _option(gate, _NO, "no") + (f" ({first.arg})" if first.arg else "")
    elif first.name == "revise":
        if not first.arg:
            return _clarify(command, job_id, "`/revise` needs what to change: `/revise <what>`.")
        answer = f"revise: {first.arg}"
    else:  # /override is decided before any gate: it corrects an answered one
        return _clarify(command, job_id, f"`/{first.name}` cannot answer an open question.")
    return (AnswerGate(job_id, gate.gate_id, answer, answered_by=author, ref=ref), taken)


def _control(
    command: CommentAdded, facts: CommentFacts, order: Command, job_id: int
) -> tuple[Action, ...]:
    """`/pause`, `/resume`, `/status`, `/steer`, `/withdraw`, `/budget`, `/remember` or
    `/reopen` (its closed pull request) on the job, from its decider (or an admin in place
    of one who lost write access); `/forget <id>` (a learning of the repository) from anyone
    with write access; anyone else gets 😕."""
    author = command.author.login
    decider = facts.subject.decider if facts.subject else ""
    if order.name == "forget":  # the repository's learnings: any writer keeps them
        allowed = facts.author_access in WRITERS
    elif author.casefold() == decider.casefold():
        allowed = facts.author_access in WRITERS
    else:
        allowed = facts.author_access == "admin" and facts.decider_access not in (None, *WRITERS)
    if not allowed:
        return (
            React("confused", comment_id=command.comment_id),
            Ignore(f"{author} may not /{order.name} job {job_id}", job_id),
        )
    if order.name in ("steer", "remember") and not order.arg:
        what = "the direction" if order.name == "steer" else "what to remember"
        return _clarify(command, job_id, f"`/{order.name}` needs {what}: `/{order.name} <text>`.")
    if order.name == "forget" and not is_learning_id(order.arg):
        return _clarify(
            command,
            job_id,
            "`/forget` needs a learning's id, as the pull request lists it: `/forget <id>`.",
        )
    if order.name == "budget" and not (order.dollars or 0) > 0:
        return _clarify(command, job_id, "`/budget` needs an amount of dollars: `/budget 25`.")
    ref = comment_ref(command.comment_id)
    text = f"{order.dollars}" if order.name == "budget" else order.arg
    return (
        Control(job_id, order.name, text, by=author, ref=ref),
        React("+1", comment_id=command.comment_id),
    )


def _override(
    command: CommentAdded, facts: CommentFacts, reply: Reply, order: Command, job_id: int
) -> tuple[Action, ...]:
    """`/override <answer>`: the decider corrects an answer the proxy gave alone (the one
    quoted, else the latest); the asking agent is told."""
    author = command.author.login
    decider = facts.subject.decider if facts.subject else ""
    if author.casefold() != decider.casefold() or facts.author_access not in WRITERS:
        return (
            React("confused", comment_id=command.comment_id),
            Ignore(f"{author} may not override the proxy on job {job_id}", job_id),
        )
    if not order.arg:
        return _clarify(command, job_id, "`/override` needs your answer: `/override <answer>`.")
    quoted = [g for g in facts.proxied if g in reply.quoted_gates]
    chosen = quoted[-1] if quoted else facts.proxied[-1] if facts.proxied else None
    if chosen is None:
        return _clarify(command, job_id, "the proxy has answered no question of this job alone.")
    ref = comment_ref(command.comment_id)
    return (
        Override(job_id, chosen, order.arg, by=author, ref=ref),
        React("+1", comment_id=command.comment_id),
    )


def _approval(
    command: CommentAdded, job_id: int, gate: Gate, approve: Command
) -> str | tuple[Action, ...]:
    """What an `/approve` answers, or the reply that says why it cannot be taken."""
    if approve.arg.lower() == "cancel":
        return _clarify(
            command,
            job_id,
            "an approval is acted on as soon as it is given, so there is none to cancel; "
            "to change course, answer the next question with `/revise <what>`.",
        )
    if approve.hash is None and approve.arg:
        shown = code_span(approve.arg[:60])  # the person's words, quoted as code: no markup
        return _clarify(command, job_id, f"{shown} is not a question's hash.")
    if _stale(gate, command):
        return _stale_reply(command, job_id, gate)
    return _option(gate, _YES, "yes")


def _target(reply: Reply, asked: tuple[Gate, ...]) -> Gate | str:
    """The gate the reply answers, or why none can be told."""
    hashes = {c.hash for c in reply.gate_commands if c.hash} | set(reply.quoted_hashes)
    named = [
        gate
        for gate in asked
        if gate.gate_id in reply.quoted_gates
        or any(gate.content_hash.startswith(h) for h in hashes)
    ]
    if len({gate.gate_id for gate in named}) == 1:
        return named[0]
    if hashes and not named:
        shown = ", ".join(f"`{h}`" for h in sorted(hashes))
        return f"{shown} is not the hash of an open question: what it approved has changed."
    if len(asked) == 1 and not named:
        return asked[0]
    return "more than one question is open, and this reply does not say which it answers."


def _may_move(author: str, gate: Gate, facts: CommentFacts) -> bool:
    """Whether `author` may answer `gate`: its decider while a writer, or an admin when
    the decider no longer has write access."""
    if author.casefold() == _decider(gate, facts.subject).casefold():
        return facts.author_access in WRITERS
    return facts.author_access == "admin" and facts.decider_access not in (None, *WRITERS)


def _not_theirs(
    command: CommentAdded, facts: CommentFacts, reply: Reply, gate: Gate, job_id: int
) -> tuple[Action, ...]:
    """A reply from someone who may not move the gate: advice, a refusal, or nothing."""
    author = command.author.login
    decider = _decider(gate, facts.subject)
    if author.casefold() == decider.casefold():  # the decider, without write access now
        body = (
            f"@{decider} no longer has write access to this repository, so their reply "
            f"does not answer question {gate.gate_id}. A repository admin may answer it."
        )
        key = f"lost-access:{gate.gate_id}"
        return (
            PostOnce(key, clarify_body(key, body)),
            React("confused", comment_id=command.comment_id),
            Ignore(f"{author} no longer has write access", job_id),
        )
    if reply.gate_commands:
        return (
            React("confused", comment_id=command.comment_id),
            Ignore(f"{author} may not answer gate {gate.gate_id}", job_id),
        )
    if author.casefold() in facts.advisors and reply.text:
        return (
            Advise(job_id, gate.gate_id, reply.text, advisor=author),
            React("eyes", comment_id=command.comment_id),
        )
    return (Ignore(f"{author} is not the decider", job_id),)


def _clarify(
    command: CommentAdded, job_id: int, why: str, gates: tuple[Gate, ...] = ()
) -> tuple[Action, ...]:
    """Ask the author to say which question they answer (one comment per reply)."""
    key = f"clarify:{command.comment_id}"
    lines = [f"@{command.author.login}, {why}"]
    if gates:
        lines += ["", "Open questions:"]
        lines += [f"- Question {g.gate_id}: `/approve {g.short_hash}`" for g in gates]
        lines += ["", "Quote the question you answer, or name it by its hash."]
    return (
        PostOnce(key, clarify_body(key, "\n".join(lines))),
        Ignore(f"comment {command.comment_id}: {why}", job_id),
    )


def _stale(gate: Gate, command: CommentAdded) -> bool:
    """A bare `/approve` written before the gate's content last changed (GitHub's times
    are whole seconds: a comment of the same second as the change is not called stale)."""
    changed = gate.hashed_at > gate.asked_at
    written = command.created_at
    return changed and written is not None and written < math.floor(gate.hashed_at)


def _stale_reply(command: CommentAdded, job_id: int, gate: Gate) -> tuple[Action, ...]:
    why = (
        f"question {gate.gate_id} changed after your approval was written, so it is stale. "
        f"To approve it as it is now: `/approve {gate.short_hash}`."
    )
    return _clarify(command, job_id, why)


def _option(gate: Gate, words: tuple[str, ...], default: str) -> str:
    """The gate's option that means yes (or no), or `default` when it offers none."""
    for option in gate.options:
        if option.strip().lower() in words:
            return option
    return default


def _decider(gate: Gate, subject: Subject | None) -> str:
    return gate.decider or (subject.decider if subject else "")


def _asked_before(gate: Gate, comment_id: int) -> bool:
    """Whether the gate's comment was posted before comment `comment_id`."""
    ref = gate.comment_ref or ""
    return ref.isdigit() and int(ref) < comment_id
