"""The lead's review-round tool: `answer_review` records its answer to one point of the
running round (jobs/rounds.py); the engine posts it when the round is delivered."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated

from pydantic import Field

from orchestrator.core.errors import ToolError
from orchestrator.core.messages import ToolCall, ToolResult
from orchestrator.core.tools import ToolInput, ToolSpec, choice, enum, parser, spec
from orchestrator.jobs import round_records, rounds
from orchestrator.store.sqlite import Store
from orchestrator.teams.board_tools import job_of_conversation
from orchestrator.workspace import suggestions
from orchestrator.workspace.git import GitError
from orchestrator.workspace.layout import Workspace

NAME = "answer_review"
REPLY_MAX = 2_000


class AnswerReview(ToolInput):
    point: int = Field(description="the point's number in the round's brief, e.g. 2")
    action: Annotated[str, choice(round_records.ACTIONS)] = Field(
        description="change: tasks change the code for it; answer: a reply only; disagree: "
        "not done, as the decider decided when you asked them (ask_human first)",
        json_schema_extra=enum(round_records.ACTIONS),
    )
    reply: str = Field(
        description=f"what the reviewer reads in their thread, at most {REPLY_MAX} chars: what "
        "changed, the answer, or why not (the engine adds the commit that addresses it)"
    )
    apply_suggestion: bool | None = Field(
        None,
        description="with action change, on a point whose comment holds a ```suggestion "
        "block: the engine applies it to the job branch exactly as written, no task needed",
    )


SPECS: Mapping[str, ToolSpec] = {
    NAME: spec(
        NAME,
        "Record your answer to one point of the running review round. Every point gets one: "
        "the engine replies once in the point's thread when the round is pushed, and never "
        "resolves a thread (that is the reviewer's act). A later call for the same point "
        "replaces the answer. Answer the points you have settled together, one call each in "
        "the same turn: a round of many points answered one per turn can run out of turns.",
        AnswerReview,
    )
}
_PARSE = parser(AnswerReview)


class ReviewTools:
    """A ToolRunner for `answer_review`, on the caller's job's running round."""

    def __init__(self, store: Store, workspace: Workspace) -> None:
        self._store = store
        self._workspace = workspace

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Record one answer; a refusal the model can fix comes back as an error result."""
        try:
            args = _PARSE("", dict(call.args))
            job_id = await job_of_conversation(self._store, conversation_id)
            if job_id is None:
                raise ToolError("this conversation belongs to no job")
            reply = str(args["reply"])
            if len(reply) > REPLY_MAX:
                raise ToolError(f"reply is {len(reply):,} chars; at most {REPLY_MAX:,}")
            point = int(str(args["point"]))
            action = str(args["action"])
            if args.get("apply_suggestion"):
                if action != "change":
                    raise ToolError("apply_suggestion goes with action change")
                reply += await self._apply(job_id, point)
            try:
                answered = await self._store.write(
                    lambda tx: rounds.answer_point(
                        tx, job_id, point, action=action, reply=reply, asker=conversation_id
                    )
                )
            except round_records.RoundError as exc:
                raise ToolError(str(exc)) from exc
        except ToolError as exc:
            return ToolResult(call.call_id, f"{NAME}: {exc}", is_error=True)
        return ToolResult(call.call_id, f"point {answered.number}: {answered.action}, recorded")

    async def _apply(self, job_id: int, number: int) -> str:
        """Apply the point's suggestion to the job branch; what the reply adds about it."""
        found = await self._store.read(lambda tx: rounds.running(tx, job_id))
        point = next((p.point for p in found.points if p.number == number), None) if found else None
        if found is None or point is None:
            raise ToolError(f"no point {number} in a running review round")
        text = suggestions.suggestion(point.body)
        seen = suggestions.seen_line(point.hunk or "")
        if text is None or point.path is None or point.line is None or seen is None:
            raise ToolError(f"point {number} has no suggestion on a line that can be applied")
        if point.outdated:
            raise ToolError(f"point {number} is outdated: its line has changed; use a task")
        space = await self._workspace.job(job_id)
        if space is None:
            raise ToolError("the job has no workspace")
        message = (
            f"Apply @{point.author}'s suggestion (review round {found.number}, point {number})"
        )
        try:
            commit = await self._workspace.apply_suggestion(
                space,
                path=point.path,
                line=point.line,
                seen=seen,
                replacement=text,
                message=message,
            )
        except GitError as exc:
            raise ToolError(f"the suggestion was not applied: {exc}; use a task") from exc
        return f" (The suggestion was applied as written in {commit[:12]}.)"
