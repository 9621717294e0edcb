"""A job's issue edited after it started: recorded, and put to the decider (bus/revisions.py).

The edge tells the engine the text a job starts from (`started`) and each edit it sees
(`edited`); an edit parks the job at an `intent` gate until the decider answers it.
"""

from __future__ import annotations

from orchestrator.bus import gates
from orchestrator.bus.events import EventBus, GateAsked
from orchestrator.jobs import revisions
from orchestrator.jobs.revisions import Edited, IssueText, Revision
from orchestrator.store.sqlite import Store, Tx


class IssueEdits:
    """The texts of jobs' issues, in the store."""

    def __init__(self, store: Store, events: EventBus) -> None:
        self.store = store
        self.events = events

    async def started(self, job_id: int, text: IssueText) -> bool:
        """Keep the text the job starts from, once; False when it was kept already."""
        return await self.store.write(lambda tx: revisions.record_original(tx, job_id, text))

    async def edited(
        self,
        job_id: int,
        text: IssueText,
        *,
        by: str,
        edited_at: float | None = None,
        before: IssueText | None = None,
    ) -> Edited:
        """The job's issue now reads `text` (edited by `by` at `edited_at`): a gate asks the
        decider whether the job works to it, unless there is nothing new to ask."""

        def record(tx: Tx) -> tuple[Edited, gates.Gate | None]:
            done = revisions.edited(tx, job_id, text, by=by, edited_at=edited_at, before=before)
            asked = None
            if done.outcome == "asked" and done.gate_id is not None:
                asked = gates.get(tx, done.gate_id)
            return done, asked

        done, asked = await self.store.write(record)
        if asked is not None:
            self.events.publish(
                GateAsked(asked.gate_id, asked.conversation_id, asked.kind, asked.question)
            )
        return done

    async def waiting(self, job_id: int) -> int | None:
        """The open gate of an edit of the job's issue, if any: the job makes no model call."""
        return await self.store.read(lambda tx: revisions.waiting(tx, job_id))

    async def revisions(self, job_id: int) -> list[Revision]:
        """The job's issue texts, oldest first (`original`, then each edit and its fate)."""
        return await self.store.read(lambda tx: revisions.revisions(tx, job_id))
