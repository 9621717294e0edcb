"""The intent gate: the office manager's restatement of the issue goes to the decider before
the lead plans anything, pinned; approved it goes out as written, revised it is restated."""

from __future__ import annotations

from pathlib import Path

from intent_support import ASKS_INTENT, DEFAULTS, TITLE, CountingDemo, Drive, driving, pinned_hash

from orchestrator.bus.sends import SendIntent
from orchestrator.bus.transactions import conversation
from orchestrator.core.messages import job_conversation_id
from orchestrator.jobs import intent_gate, revisions
from orchestrator.store.sqlite import Tx


async def lead_brief(drive: Drive) -> str:
    """The first message the project lead received from the office manager."""
    root = job_conversation_id(drive.job_id)
    (lead,) = await drive.office.engine.store.read(
        lambda tx: tx.execute(
            "SELECT conversation_id FROM conversations WHERE parent_id = ?", (root,)
        ).fetchone()
    )
    return (await drive.transcript(lead))[0].text


async def test_the_restatement_is_asked_first_and_goes_out_as_written(tmp_path: Path) -> None:
    model = CountingDemo()
    async with driving(tmp_path, ASKS_INTENT, model) as (office, drive):
        job_id = drive.job_id
        (asked,) = await drive.until_waiting()
        assert (asked.kind, asked.engine_made, asked.options) == ("intent", True, ("yes", "no"))
        assert asked.question.startswith(f"Job: {TITLE}\n\n<issue>\nWe need one.\n</issue>")
        assert asked.conversation_id == job_conversation_id(job_id)
        assert model.agent_calls() == 1, "the lead has not been briefed, so it has not run"
        title, brief, base = await office.engine.store.read(
            lambda tx: revisions.job_content(tx, job_id)
        )
        pinned = {"to": ["widgets/project-lead"], "continues": [None]}
        assert asked.content_hash == await pinned_hash(office, asked, pinned=pinned)
        assert (title, "We need one." in brief, bool(base)) == (TITLE, True, True)

        await drive.answer(asked, "yes")
        (plan,) = await drive.until_waiting()
        assert plan.kind == "plan"
        assert await lead_brief(drive) == asked.question, "the send went out exactly as approved"
        assert await drive.to_the_end() == "done"
        assert [g.kind for g in await drive.every_gate()] == ["intent", "plan"]


async def test_a_revised_restatement_is_restated_and_asked_again(tmp_path: Path) -> None:
    async with driving(tmp_path, ASKS_INTENT) as (office, drive):
        (first,) = await drive.until_waiting()
        await drive.answer(first, "revise: say that it is for the release notes")
        (second,) = await drive.until_waiting()
        assert second.kind == "intent"
        assert second.gate_id != first.gate_id
        assert "As the decider asked: send: the decider did not approve" in second.question
        assert "say that it is for the release notes" in second.question
        assert second.content_hash != first.content_hash
        root = await drive.transcript()
        errors = [m for m in root if m.role == "tool" and m.content.get("is_error")]
        assert [m.call_id for m in errors] == ["job"], "the first send came back as an error"

        await drive.answer(second, "yes")
        (plan,) = await drive.until_waiting()
        assert plan.kind == "plan"
        assert await lead_brief(drive) == second.question
        assert await drive.to_the_end() == "done"


async def test_once_approved_later_sends_go_at_once(tmp_path: Path) -> None:
    async with driving(tmp_path, ASKS_INTENT) as (office, drive):
        job_id = drive.job_id
        (asked,) = await drive.until_waiting()
        root = job_conversation_id(job_id)
        again = [SendIntent("later", "widgets", "One more thing.")]

        def hold(tx: Tx) -> int | None:
            return intent_gate.hold(tx, conversation(tx, root), again)

        assert not await office.engine.store.read(lambda tx: intent_gate.approved(tx, job_id))
        await drive.answer(asked, "ok, go ahead")
        assert await office.engine.store.read(lambda tx: intent_gate.approved(tx, job_id))
        assert await office.engine.store.write(hold) is None


async def test_with_intent_never_the_brief_goes_at_once(tmp_path: Path) -> None:
    async with driving(tmp_path, DEFAULTS) as (office, drive):
        (plan,) = await drive.until_waiting()
        assert plan.kind == "plan"
        assert await drive.to_the_end() == "done"
        assert [g.kind for g in await drive.every_gate()] == ["plan"]
