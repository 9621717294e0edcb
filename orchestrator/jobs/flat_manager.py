"""The office manager's turns that add nothing, made by the engine instead of a model.

Seed 000, "when the hierarchy flattens": the office manager adds a turn only where it adds
something. Passing the lead's reply back as the job's (its one send's result) is no
judgement, and on a job whose decider does not check its restatement (the `intent` gate's
mode is `never`) neither is handing the job's brief, or a review round's, to the project's
lead as written: the engine makes those turns. Everything else goes to the model (a person's
direction, an error from the lead, an intent gate's answer, a question), and each such
call is recorded with why it was needed. The turns are a function of the transcript alone,
so a restarted engine makes the same ones; they are recorded on the job's log, and they
cost nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from orchestrator.bus import gates
from orchestrator.bus import jobs as job_rows
from orchestrator.core.messages import AssistantTurn, Message, ToolCall
from orchestrator.core.model import Model, ModelRequest
from orchestrator.jobs import intent_gate
from orchestrator.store.sqlite import Store, Tx
from orchestrator.teams.board import log_event

FLAT = "flat:"  # the call id prefix of the engine's sends for the office manager
EVENT = "office manager"
_ROUND = re.compile(r"^Review round \d+ on the job's pull request")
_JOB = re.compile(r"^job:(\d+)$")


class FlatManager:
    """The office manager's model, with the engine making the turns that add nothing."""

    def __init__(self, inner: Model, store: Store) -> None:
        self.inner = inner
        self.store = store

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The engine's turn where it adds nothing; else the model's, recorded with why."""
        messages = request.messages
        found = _JOB.match(messages[0].conversation_id) if messages else None
        if found is None:  # a compaction request, or not a job's conversation
            return await self.inner.complete(request)
        job_id = int(found.group(1))
        project = await self.store.read(lambda tx: _flat_project(tx, job_id))
        turn, why = _flat_turn(messages, request.system, project)
        if turn is not None:
            await self.store.write(lambda tx: log_event(tx, job_id, None, EVENT, why))
            return turn
        await self.store.write(lambda tx: log_event(tx, job_id, None, EVENT, f"asked: {why}"))
        return await self.inner.complete(request)


def _flat_project(tx: Tx, job_id: int) -> str | None:
    """The job's project, where its decider does not check the office manager's restatement
    (the store's word, never the brief's: an issue's text can name any project)."""
    if gates.mode(tx, job_id, intent_gate.KIND) != "never":
        return None
    return job_rows.project_of(tx, job_id)


def _flat_turn(
    messages: Sequence[Message], system: str, project: str | None
) -> tuple[AssistantTurn | None, str]:
    """The turn the engine makes for this transcript, or None; and why (either way)."""
    last = messages[-1]
    if last.role == "tool":
        mine = [m for m in messages if m.role == "assistant"]
        calls = mine[-1].tool_calls if mine else ()
        if len(calls) != 1 or calls[0].name != "send":
            return None, "replies to more than one call"
        if last.content.get("is_error"):
            return None, "the lead's reply is an error"
        return AssistantTurn(text=last.text), "passed the lead's reply on as the job's"
    fresh = _since_last_turn(messages)
    if not fresh:
        return None, "nothing new to pass on"
    first_turn = len(messages) == len(fresh) == 1
    if not first_turn and not all(_ROUND.match(m.text) for m in fresh):
        return None, "a message that is not the job's or a review round's brief"
    if project is None:
        return None, "the decider checks the office manager's restatement (intent gate)"
    if project not in _reachable(system):
        return None, f"the office manager cannot reach project {project}'s lead"
    call_id = f"{FLAT}{len(messages)}"
    brief = "\n\n".join(m.text for m in fresh)
    send = ToolCall(call_id, "send", {"member": project, "message": brief})  # the lead's alias
    turn = AssistantTurn(tool_calls=(send,))
    what = "the job's brief" if first_turn else "a review round's brief"
    return turn, f"sent {what} to the project lead as written (no intent gate)"


def _since_last_turn(messages: Sequence[Message]) -> list[Message]:
    fresh: list[Message] = []
    for message in reversed(messages):
        if message.role == "assistant":
            break
        if message.role == "user":
            fresh.insert(0, message)
    return fresh


def _reachable(system: str) -> list[str]:
    """Whom the office manager can send to, as its standing context says."""
    line = next((line for line in system.splitlines() if line.startswith("You can send to: ")), "")
    return line.removeprefix("You can send to: ").rstrip(".").split(", ")
