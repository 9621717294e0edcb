"""An edit of the issue after the job started: the job holds at an intent gate showing the
difference; approved, it works to the new text (its other gates hashed again); rejected, it
keeps the old; the same edit twice asks once, and a newer edit replaces an open gate."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from intent_support import BODY, DEFAULTS, TITLE, CountingDemo, Drive, driving, pinned_hash

from orchestrator.bus import gates
from orchestrator.bus.gates import Gate
from orchestrator.core.errors import GateClosedError
from orchestrator.core.messages import Message, job_conversation_id
from orchestrator.jobs import revisions
from orchestrator.jobs.office import Office
from orchestrator.jobs.revisions import IssueText
from orchestrator.jobs.withdraw import withdraw

ORIGINAL = IssueText(TITLE, BODY)
EDITED = IssueText(TITLE, "We need one, with a section per release.")


@asynccontextmanager
async def at_the_plan(
    tmp_path: Path, model: CountingDemo | None = None
) -> AsyncIterator[tuple[Office, Drive]]:
    """A job (intent: never) parked at its plan gate, its original text recorded; the office
    is closed after."""
    async with driving(tmp_path, DEFAULTS, model) as (office, drive):
        assert await office.issue_edits.started(drive.job_id, ORIGINAL)
        assert not await office.issue_edits.started(drive.job_id, EDITED), "kept once"
        (plan,) = await drive.until_waiting()
        assert plan.kind == "plan"
        yield office, drive


async def content(office: Office, job_id: int) -> tuple[str, str, str]:
    return await office.engine.store.read(lambda tx: revisions.job_content(tx, job_id))


async def states(office: Office, job_id: int) -> list[str]:
    return [r.state for r in await office.issue_edits.revisions(job_id)]


async def test_an_approved_edit_is_worked_to_and_stales_the_other_gates(tmp_path: Path) -> None:
    model = CountingDemo()
    async with at_the_plan(tmp_path, model) as (office, drive):
        job_id = drive.job_id
        (plan,) = await office.open_gates(job_id)
        edited = await office.issue_edits.edited(job_id, EDITED, by="bob", edited_at=100.0)
        assert edited.outcome == "asked"
        assert edited.gate_id is not None
        edit = await gate(office, edited.gate_id)
        assert (edit.kind, edit.engine_made, edit.options) == ("intent", True, ("yes", "no"))
        assert edit.question.startswith(revisions.QUESTION)
        assert "-We need one.\n+We need one, with a section per release." in edit.question
        assert "+++ as edited by bob" in edit.question
        assert await office.engine.bus.held(job_id)

        calls = len(model.agents)
        await drive.answer(plan, "yes")  # the plan runs its dispatch, but no agent may think
        await drive.until_waiting()
        assert len(model.agents) == calls, "no model call, the proxy's included, while it waits"
        decided = await office.proxy.decision(edit.gate_id)
        assert decided is not None
        assert decided.answer is None
        assert "the issue was edited: the job waits at question" in decided.why
        assert await office.engine.bus.runnable(job_id) == []

        before = await content(office, job_id)
        await drive.answer(edit, "approve")
        assert not await office.engine.bus.held(job_id)
        assert await states(office, job_id) == ["original", "approved"]
        title, brief, base = await content(office, job_id)
        assert (title, brief, base) == (TITLE, EDITED.body, before[2])
        assert await job_title(office, job_id) == TITLE
        assert await drive.to_the_end() == "done"
        told = [m.text for m in await lead_transcript(drive) if m.role == "user"][1:]
        assert len(told) == 1
        assert told[0].startswith(
            "The issue was edited; the decider (carol) approved working to the new text."
        )
        assert "```diff\n" in told[0]
        assert "+We need one, with a section per release." in told[0]


async def test_an_edit_rehashes_every_other_open_gate_at_once(tmp_path: Path) -> None:
    async with at_the_plan(tmp_path) as (office, drive):
        job_id = drive.job_id
        (plan,) = await office.open_gates(job_id)
        space = await office.workspace.job(job_id)
        assert space is not None
        base = (await content(office, job_id))[2]
        assert base == space.base, "the plan gate (teams/) pins the workspace's base too"
        assert plan.content_hash == await pinned_hash(office, plan)
        edited = await office.issue_edits.edited(job_id, EDITED, by="bob")
        after = await gate(office, plan.gate_id)
        title, brief, base = await content(office, job_id)
        assert base == space.base
        assert (title, brief) == (TITLE, EDITED.body), "the issue as it now reads"
        assert after.content_hash != plan.content_hash
        assert after.content_hash == await pinned_hash(office, plan)
        assert after.hashed_at > after.asked_at, "an approval written before now is stale"
        assert edited.gate_id is not None
        await drive.answer(await gate(office, edited.gate_id), "yes")
        approved = await gate(office, plan.gate_id)
        assert (approved.content_hash, approved.hashed_at) == (after.content_hash, after.hashed_at)


async def test_a_rejected_edit_keeps_the_old_text_and_tells_nobody(tmp_path: Path) -> None:
    async with at_the_plan(tmp_path) as (office, drive):
        job_id = drive.job_id
        (plan,) = await office.open_gates(job_id)
        before = await content(office, job_id)
        edited = await office.issue_edits.edited(job_id, EDITED, by="bob")
        assert edited.gate_id is not None
        answered = await drive.answer(await gate(office, edited.gate_id), "no, ignore that")
        assert answered.answer == "no, ignore that"
        assert not await office.engine.bus.held(job_id)
        assert await states(office, job_id) == ["original", "rejected"]
        assert await content(office, job_id) == before
        back = await gate(office, plan.gate_id)
        assert back.content_hash == plan.content_hash, "the text it had, so the hash it had"
        assert back.hashed_at > back.asked_at, "but what was approved before the edit is stale"
        assert await drive.to_the_end() == "done"
        assert not [m for m in await lead_transcript(drive) if "issue was edited" in m.text]


async def test_a_title_edit_shows_the_title_line_only(tmp_path: Path) -> None:
    async with at_the_plan(tmp_path) as (office, drive):
        renamed = IssueText("Add a CHANGELOG.md", BODY)
        edited = await office.issue_edits.edited(drive.job_id, renamed, by="alice")
        assert edited.gate_id is not None
        diff = (await gate(office, edited.gate_id)).payload["diff"]
        changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
        assert changed == [f"-Title: {TITLE}", "+Title: Add a CHANGELOG.md"]
        await drive.answer(await gate(office, edited.gate_id), "yes")
        assert await job_title(office, drive.job_id) == "Add a CHANGELOG.md"
        assert (await content(office, drive.job_id))[:2] == ("Add a CHANGELOG.md", BODY)


async def test_the_same_edit_twice_asks_once_and_a_newer_one_replaces_it(tmp_path: Path) -> None:
    async with at_the_plan(tmp_path) as (office, drive):
        job_id = drive.job_id
        first = await office.issue_edits.edited(job_id, EDITED, by="bob", edited_at=100.0)
        again = await office.issue_edits.edited(job_id, EDITED, by="bob", edited_at=100.0)
        assert (again.outcome, again.gate_id) == ("seen", first.gate_id)
        assert len(await office.open_gates(job_id)) == 2  # the plan and one edit

        latest = IssueText(TITLE, "We need one, by Friday.")
        newer = await office.issue_edits.edited(job_id, latest, by="bob", edited_at=101.0)
        assert newer.outcome == "asked"
        assert newer.replaced == (first.gate_id,)
        assert first.gate_id is not None
        assert newer.gate_id is not None
        shown = (await gate(office, newer.gate_id)).payload["diff"]
        assert "-We need one.\n+We need one, by Friday." in shown, "against the text worked to"
        assert "section per release" not in shown
        replaced = await gate(office, first.gate_id)
        assert replaced.closed_at is not None
        assert replaced.answer is None
        with pytest.raises(GateClosedError, match="a later edit of the issue replaced it"):
            await drive.answer(replaced, "yes")
        open_ids = [g.gate_id for g in await office.open_gates(job_id)]
        assert newer.gate_id in open_ids
        assert first.gate_id not in open_ids

        late = await office.issue_edits.edited(job_id, EDITED, by="bob", edited_at=99.0)
        assert late.outcome == "older"
        assert await states(office, job_id) == ["original", "replaced", "asked"]

        back = await office.issue_edits.edited(job_id, ORIGINAL, by="bob", edited_at=102.0)
        assert back == revisions.Edited("reverted", replaced=(newer.gate_id,))
        assert not await office.engine.bus.held(job_id), "back to the text it works to"
        assert [g.kind for g in await office.open_gates(job_id)] == ["plan"]
        assert await drive.to_the_end() == "done"


async def test_a_redelivered_edit_after_its_answer_asks_nothing(tmp_path: Path) -> None:
    async with at_the_plan(tmp_path) as (office, drive):
        job_id = drive.job_id
        first = await office.issue_edits.edited(job_id, EDITED, by="bob", edited_at=100.0)
        assert first.gate_id is not None
        await drive.answer(await gate(office, first.gate_id), "no")
        again = await office.issue_edits.edited(job_id, EDITED, by="bob", edited_at=100.0)
        assert again == revisions.Edited("seen")
        same = await office.issue_edits.edited(job_id, ORIGINAL, by="bob", edited_at=101.0)
        assert same == revisions.Edited("unchanged"), "it says what the job works to"
        assert [g.kind for g in await office.open_gates(job_id)] == ["plan"]


async def test_an_edit_of_an_ended_job_or_one_without_its_original(tmp_path: Path) -> None:
    async with driving(tmp_path, DEFAULTS) as (office, drive):
        job_id = drive.job_id
        before = IssueText(TITLE, "What the issue said before the edit.")
        edited = await office.issue_edits.edited(job_id, EDITED, by="bob", before=before)
        assert edited.outcome == "asked"
        assert edited.gate_id is not None
        shown = (await gate(office, edited.gate_id)).payload["diff"]
        assert "-What the issue said before the edit." in shown, "the forge's word stands in"
        assert await states(office, job_id) == ["original", "asked"]

        await withdraw(office, job_id, by="carol")
        ended = await office.issue_edits.edited(job_id, ORIGINAL, by="bob")
        assert ended == revisions.Edited("ended")


def test_the_diff_is_trimmed() -> None:
    old = IssueText("t", "\n".join(f"line {n}" for n in range(200)))
    new = IssueText("t", "\n".join(f"line {n}!" for n in range(200)))
    shown = revisions.diff(old, new, by="bob", lines=20, chars=6000)
    assert len(shown.splitlines()) == 21
    assert shown.endswith("more line(s) of the diff not shown")
    assert len(revisions.diff(old, new, by=None, lines=None, chars=500)) < 600
    assert revisions.fenced("a ```` b", "diff").startswith("`````diff\n")


async def job_title(office: Office, job_id: int) -> str:
    job = await office.records.job(job_id)
    assert job is not None
    return job.title


async def gate(office: Office, gate_id: int) -> Gate:
    return await office.engine.store.read(lambda tx: gates.get(tx, gate_id))


async def lead_transcript(drive: Drive) -> tuple[Message, ...]:
    root = job_conversation_id(drive.job_id)
    (lead,) = await drive.office.engine.store.read(
        lambda tx: tx.execute(
            "SELECT conversation_id FROM conversations WHERE parent_id = ?", (root,)
        ).fetchone()
    )
    return await drive.transcript(lead)
