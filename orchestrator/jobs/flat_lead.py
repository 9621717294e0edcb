"""A job that is one change goes straight to one mini-team: the project lead's turns that
would add nothing, made by the engine.

Seed 000, "when the hierarchy flattens": simple work may go directly to a single agent. On
a job's first brief the lead's own model is asked one short question without tools (the
triage: is this one reviewable change?). `one`: the engine makes the lead's turns, a task
whose title is the job's and whose spec is the brief as given (review full), then its
dispatch with a brief that lets the worker hand it back (`blocked:` with the tasks it
would make) before changing anything; once that task is merged and the board holds no
other work, the mini-team's report is the lead's reply. Anything else (an answer that is
not `one`, a task handed back, blocked or escalated, a conflict, an error, a review round,
a person's message) goes to the lead's model, which reads the engine's turns as its own.
Every turn is logged on the job with why. The turns are a function of the transcript and
the board, so a restarted engine makes the same ones (a triage cut short is asked again).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from orchestrator.bus import jobs as job_rows
from orchestrator.bus import transactions as txn
from orchestrator.core.clock import run_deadline_passed
from orchestrator.core.errors import TurnDeferred
from orchestrator.core.messages import (
    AssistantTurn,
    ConversationKind,
    Message,
    ToolCall,
    Usage,
)
from orchestrator.core.model import Model, ModelRequest
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams.board import list_tasks, log_event, task_log

FLAT = "flat-lead:"  # the call id prefix of the engine's calls for the project lead
EVENT = "project lead"
CREATE, DISPATCH = f"{FLAT}task", f"{FLAT}dispatch"
TRIAGE = (
    "You sort software jobs before anyone plans them. Reply with one word: `one` when the "
    "request is a single reviewable change (one pull request a reviewer reads in one "
    "sitting: a fix, a small feature, a documentation edit) whose scope is clear; `plan` "
    "when it needs several changes, research before any change, or a question to the "
    "person who asked. When unsure, `plan`."
)
WHOLE_JOB = (
    "This task is the whole job, sent to your mini-team without a plan because it was judged "
    "one change. If it is clearly more than one reviewable change, reply at once, before "
    "changing anything: `blocked: more than one task:` and the tasks you would make, one a "
    "line; your project lead then plans it. Your reply becomes the pull request's summary: "
    "end it with a line `Learnings:` and up to 5 one-line bullets a later task in this "
    "repository should know (commands that worked, conventions, pitfalls; none if nothing "
    "is worth keeping)."
)
_ROUND = re.compile(r"^Review round \d+ on the job's pull request")
_CREATED = re.compile(r"^created #(\d+) ")
_MERGED = re.compile(r"^Task #(\d+) merged into ")


class FlatLead:
    """A project lead's model, with the engine making its turns on a job of one change."""

    def __init__(self, inner: Model, store: Store) -> None:
        self.inner = inner
        self.store = store

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The engine's turn where the job is one change and nothing needs judgement; else
        the model's, logged with why."""
        messages = request.messages
        if not messages or messages[0].role != "user" or not _engine_only(messages):
            return await self.inner.complete(request)  # a compaction, or the model's job now
        conversation = messages[0].conversation_id
        facts = await self.store.read(lambda tx: _facts(tx, conversation))
        if facts is None:  # not a job's
            return await self.inner.complete(request)
        job_id, title, open_tasks = facts
        turn, why = _flat_turn(messages, title, open_tasks)
        triage = None
        if turn is None and why == TRIAGE_NEEDED and await self._triaged_before(job_id):
            why = "the job needs a plan (triaged in an earlier run)"
        elif turn is None and why == TRIAGE_NEEDED:
            triage = await self.inner.complete(
                ModelRequest(request.agent, TRIAGE, messages[:1], ())
            )
            turn, why = _triaged(triage, title, messages[0].text)
        if turn is None:
            await self.store.write(lambda tx: log_event(tx, job_id, None, EVENT, f"asked: {why}"))
            if triage is not None and run_deadline_passed():  # the triage outlasted the run:
                # its verdict is on the log (the next run reads it), the lead's call is not made
                raise TurnDeferred("the run's deadline passed during the project lead's triage")
            turn = await self.inner.complete(request)
        else:
            await self.store.write(lambda tx: log_event(tx, job_id, None, EVENT, why))
        if triage is not None and triage.usage is not None:  # the triage's call is the turn's
            turn = replace(turn, usage=triage.usage + (turn.usage or Usage()))
        return turn

    async def _triaged_before(self, job_id: int) -> bool:
        """Whether an earlier run's triage said the job needs a plan (and then stopped)."""
        log = await self.store.read(lambda tx: task_log(tx, job_id))
        return any(
            event == EVENT and detail.startswith(f"asked: {NEEDS_PLAN}") for _, event, detail in log
        )


# The last sentence of a job's brief is the engine's word to the office manager
# (bot/handlers/issues.py, bot/local_run.py); the worker who gets the brief as its spec is not
# to hand anything to anyone.
_TO_THE_MANAGER = re.compile(r"\s*Hand it to the project's lead\b[^\n]*\Z")


def _triaged(answer: AssistantTurn, title: str, brief: str) -> tuple[AssistantTurn | None, str]:
    """The engine's first turn for the lead when the triage says `one`: the job as its one
    task; else None and why."""
    if answer.text.strip().strip("`*.").lower() != "one":
        said = " ".join(answer.text.split())[:80] or "(nothing)"
        return None, f"{NEEDS_PLAN} (triage: {said})"
    spec = _TO_THE_MANAGER.sub("", brief.rstrip()) or brief
    create = ToolCall(CREATE, "task_create", {"title": title, "spec": spec, "review": "full"})
    return AssistantTurn(
        tool_calls=(create,)
    ), "one change (triage): the job is one task, for one mini-team"


TRIAGE_NEEDED = "the job's first brief"
NEEDS_PLAN = "the job needs a plan"


def _engine_only(messages: Sequence[Message]) -> bool:
    """Whether every turn of the lead so far is the engine's."""
    turns = [m for m in messages if m.role == "assistant"]
    return all(c.call_id.startswith(FLAT) for m in turns for c in m.tool_calls) and all(
        m.tool_calls for m in turns
    )


def _facts(tx: Tx, conversation_id: str) -> tuple[int, str, int] | None:
    """The job of a lead's conversation the office manager opened: its id, its title and
    how many of its tasks are not done; None when it is no such conversation."""
    listed = txn.listed(tx, conversation_id)
    if listed is None or listed.kind != ConversationKind.DISPATCH.value or listed.job_id is None:
        return None
    job = job_rows.get(tx, listed.job_id)
    if job is None:
        return None
    job_id, title = job.job_id, job.title
    open_tasks = sum(t.state not in ("done", "cancelled") for t in list_tasks(tx, job_id))
    return job_id, title, open_tasks


def _flat_turn(
    messages: Sequence[Message], title: str, open_tasks: int
) -> tuple[AssistantTurn | None, str]:
    """The turn the engine makes for this transcript, or None and why the model is asked
    (TRIAGE_NEEDED: the triage decides)."""
    last = messages[-1]
    if len(messages) == 1:
        if _ROUND.match(last.text):
            return None, "a review round on the pull request"
        return None, TRIAGE_NEEDED
    if last.role != "tool":
        return None, "a message after the engine's turns"
    if last.call_id == CREATE:
        found = _CREATED.match(last.text)
        if last.content.get("is_error") or found is None:
            return None, f"the job's task could not be made: {last.text[:120]}"
        task = int(found.group(1))
        call = ToolCall(DISPATCH, "dispatch", {"task": task, "brief": WHOLE_JOB})
        return AssistantTurn(tool_calls=(call,)), f"dispatched task #{task}, the whole job"
    if last.call_id == DISPATCH:
        if last.content.get("is_error") or not _MERGED.match(last.text):
            return None, f"the task came back: {' '.join(last.text.split())[:120]}"
        if open_tasks:
            return None, f"{open_tasks} task(s) of the board still open"
        return AssistantTurn(text=last.text), "passed the mini-team's report on as the lead's"
    return None, "a turn the engine does not make"
