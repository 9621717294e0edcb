"""Review rounds in the engine, on a real store and repository with the demo organisation:
feedback that comes while a round runs waits for the next one, a redelivered review adds
nothing, the round past the cap is a question to the decider, and the lead may disagree
with a reviewer only once the decider was asked."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakes import FakeForge, FunctionModel
from local_repo import git as local_git
from local_repo import make_repo as repository
from test_budget_gate import billed, drive, open_office, start

from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs import rounds
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.round_records import Feedback, Point, RoundError

TEXT = "humans: {decider: carol}\ngates: {plan: never}\n"


def demo() -> FunctionModel:
    model = DemoModel(title="Add a changelog", body="We need one.", path="docs/changelog.md")

    async def reply(request: ModelRequest) -> AssistantTurn:
        return await model.complete(request)

    return FunctionModel(reply)


def points(*bodies: str, thread: str = "T") -> Feedback:
    made = tuple(
        Point(f"thread:{thread}{n}:{n}", "alice", body, thread_id=f"{thread}{n}", comment_id=n)
        for n, body in enumerate(bodies, start=1)
    )
    return Feedback(("alice",), made)


async def delivered(tmp_path: Path, text: str = TEXT) -> tuple[Office, FakeForge, int]:
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home", text, demo())
    job_id = await start(office, repo, text)
    forge = FakeForge(office)
    assert await drive(office, forge, job_id) == "done"
    await office.rounds.pull_opened(job_id, 2, "https://github.test/o/r/pull/2")
    return office, forge, job_id


async def test_feedback_during_a_round_waits_for_the_next_round(tmp_path: Path) -> None:
    office, forge, job_id = await delivered(tmp_path)
    try:
        first = await office.rounds.feedback(job_id, points("Rename it.", "Add a test."))
        assert (first.round_number, first.added, first.state) == (1, 2, "running")
        second = await office.rounds.feedback(job_id, points("And the docs.", thread="U"))
        assert (second.round_number, second.added, second.state) == (2, 1, "queued")
        assert await drive(office, forge, job_id) == "done"  # round 2 starts as 1 ends
        done = await office.rounds.of_job(job_id)
        assert [(r.number, r.state, len(r.points)) for r in done] == [
            (1, "delivered", 2),
            (2, "delivered", 1),
        ]
        assert [r.number for r in forge.rounds_delivered] == [1, 2]
        assert all(p.action == "change" for r in done for p in r.points)
        assert await office.rounds.handled(job_id) == {"T1": 1, "T2": 2, "U1": 1}
    finally:
        await office.close()


async def test_a_round_of_more_points_than_the_leads_turns_is_answered_whole(
    tmp_path: Path,
) -> None:
    office, forge, job_id = await delivered(tmp_path)
    lead = office.org.agents[office.org.project_lead]
    many = lead.max_turns + 10  # answered one a turn, the lead would stop short
    try:
        await office.rounds.feedback(job_id, points(*(f"Fix {n}." for n in range(1, many + 1))))
        assert await drive(office, forge, job_id) == "done"
        (done,) = await office.rounds.of_job(job_id)
        assert done.state == "delivered"
        assert [p.action for p in done.points] == ["change"] * many
    finally:
        await office.close()


async def test_a_redelivered_review_adds_nothing(tmp_path: Path) -> None:
    office, forge, job_id = await delivered(tmp_path)
    try:
        await office.rounds.feedback(job_id, points("Rename it."))
        again = await office.rounds.feedback(job_id, points("Rename it."))
        assert (again.round_number, again.added) == (None, 0)
        assert await drive(office, forge, job_id) == "done"
        after = await office.rounds.feedback(job_id, points("Rename it."))
        assert (after.round_number, after.added) == (None, 0)
        assert len(await office.rounds.of_job(job_id)) == 1
    finally:
        await office.close()


async def test_the_sixth_round_is_a_question_to_the_decider(tmp_path: Path) -> None:
    office, forge, job_id = await delivered(tmp_path)
    try:
        for n in range(1, 6):
            taken = await office.rounds.feedback(job_id, points(f"Point {n}.", thread=f"R{n}-"))
            assert taken.state == "running"
            assert await drive(office, forge, job_id) == "done"
        sixth = await office.rounds.feedback(job_id, points("Once more.", thread="R6-"))
        assert (sixth.round_number, sixth.state) == (6, "asked")
        (gate,) = await office.open_gates(job_id)
        assert (gate.kind, gate.engine_made) == ("question", True)
        assert "5 review round(s), the project's limit" in gate.question
        await office.answer_gate(gate.gate_id, text="no", answered_by="carol")
        (stopped,) = [r for r in await office.rounds.of_job(job_id) if r.number == 6]
        assert stopped.state == "stopped"
        assert "did not approve" in (stopped.outcome or "")
        assert len(forge.rounds_delivered) == 5

        seventh = await office.rounds.feedback(job_id, points("Please.", thread="R7-"))
        assert seventh.state == "asked"
        (gate,) = await office.open_gates(job_id)
        await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await drive(office, forge, job_id) == "done"
        assert [r.number for r in forge.rounds_delivered] == [1, 2, 3, 4, 5, 7]
    finally:
        await office.close()


async def test_the_lead_disagrees_only_after_asking_the_decider(tmp_path: Path) -> None:
    office, forge, job_id = await delivered(tmp_path)
    store = office.engine.store
    try:
        await office.rounds.feedback(job_id, points("Use tabs."))
        with pytest.raises(RoundError, match="ask the decider first"):
            await store.write(
                lambda tx: rounds.answer_point(
                    tx, job_id, 1, action="disagree", reply="We use spaces.", asker=None
                )
            )
        with pytest.raises(RoundError, match="has no point 3"):
            await store.write(
                lambda tx: rounds.answer_point(
                    tx, job_id, 3, action="answer", reply="?", asker=None
                )
            )
        answered = await store.write(
            lambda tx: rounds.answer_point(
                tx, job_id, 1, action="answer", reply="Spaces, as PEP 8 says.", asker=None
            )
        )
        assert (answered.action, answered.reply) == ("answer", "Spaces, as PEP 8 says.")
    finally:
        await office.close()


async def test_the_watchdog_stops_a_round_that_makes_no_progress_once(tmp_path: Path) -> None:
    office, forge, job_id = await delivered(tmp_path)
    store = office.engine.store
    try:
        await office.rounds.feedback(job_id, points("Rename it."))
        started = (await office.rounds.running(job_id)) is not None
        assert started
        soon = time.time() + 60
        assert await office.rounds.watchdog(job_id, at=soon) is None  # 1 minute: not stalled
        later = time.time() + 31 * 60
        reason = await office.rounds.watchdog(job_id, at=later)
        assert reason is not None
        assert reason.startswith("review round 1 made no progress for 30 minutes")
        (failure,) = await office.failures(job_id)
        assert failure.reason == reason
        assert await office.rounds.watchdog(job_id, at=later + 3600) is None  # once a round
        await office.retry(job_id)
        assert await office.rounds.watchdog(job_id, at=later + 3600) is None
        assert await drive(office, forge, job_id) == "done"  # it goes on when retried
        (done,) = await office.rounds.of_job(job_id)
        assert done.state == "delivered"
        assert await store.read(lambda tx: rounds.running(tx, job_id)) is None
    finally:
        await office.close()


async def test_a_round_past_its_own_cap_parks_at_the_budget_gate_until_approved(
    tmp_path: Path,
) -> None:
    text = "humans: {decider: carol}\ngates: {plan: never}\nrounds: {max_usd: 0.000001}\n"
    repo = repository(tmp_path / "widgets")
    model = billed()
    office = await open_office(tmp_path / "home", text, model)
    try:
        job_id = await start(office, repo, text)
        parked = FakeForge(office, leave_open=True)
        assert await drive(office, parked, job_id) == "done"  # the cap is a round's only
        await office.rounds.pull_opened(job_id, 2, "https://github.test/o/r/pull/2")
        before = len(model.requests)
        await office.rounds.feedback(job_id, points("Rename it."))
        assert await drive(office, parked, job_id) == "waiting"
        (gate,) = await office.open_gates(job_id)
        assert gate.kind == "budget"
        assert len(model.requests) == before + 1  # one call, then nothing past the cap
        await office.answer_gate(gate.gate_id, text="yes", answered_by="carol")
        assert await drive(office, FakeForge(office), job_id) == "done"
        (done,) = await office.rounds.of_job(job_id)
        assert done.state == "delivered"
    finally:
        await office.close()


async def test_a_base_that_now_conflicts_gets_a_task_that_merges_it_in(tmp_path: Path) -> None:
    office, forge, job_id = await delivered(tmp_path)
    source = tmp_path / "widgets"
    try:
        (source / "docs").mkdir()
        (source / "docs" / "changelog.md").write_text("Someone else's changelog.\n")
        local_git(source, "add", ".")
        local_git(source, "commit", "-qm", "A changelog on main")
        await office.rounds.feedback(job_id, points("Rename it."))
        assert await drive(office, forge, job_id) == "done"
        tasks = await office.board.board.list(job_id)
        (merge,) = [t for t in tasks if t.title == "Merge the base branch into the pull request"]
        assert merge.created_by == "teaparty"
        assert merge.state == "blocked"  # the scripted worker cannot resolve conflicts
        base = local_git(source, "rev-parse", "main").strip()
        assert await office.board.board.merge_base(job_id, merge.number) == base
        (done,) = await office.rounds.of_job(job_id)
        assert [p.point.source for p in done.points] == ["thread:T1:1", f"base:{base}"]
        briefs = await office.engine.store.read(
            lambda tx: [
                t for (t,) in tx.execute("SELECT content FROM messages WHERE role = 'user'")
            ]
        )
        told = [b for b in briefs if "This task merges the base branch" in b]
        assert len(told) == 1
        assert "conflict markers in: docs/changelog.md" in told[0]
        again = await office.rounds.feedback(job_id, points("Once more.", thread="U"))
        assert again.state == "running"
        assert await drive(office, forge, job_id) == "done"
        tasks = await office.board.board.list(job_id)
        assert sum(t.title.startswith("Merge the base") for t in tasks) == 1  # once per base
    finally:
        await office.close()
