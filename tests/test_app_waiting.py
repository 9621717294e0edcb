"""A question left unanswered: a reminder after three days, the job closed after fourteen
(paused, its work kept), and taken up again with an answer and `/resume`.

The App runs in this process on a clock the test moves forward by days.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from app_harness import OWNER, REPO, OffsetClock, app_settings, bodies, in_process, until, world

from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

pytestmark = pytest.mark.timeout(180)
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
DAY = 86400.0


async def test_an_unanswered_question_reminds_then_closes_and_resume_takes_it_up(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    clock = OffsetClock()
    demo = DemoModel()
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE, clock=clock):
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the question")
            assert bodies(hub, number, "remind:") == []

            clock.offset = 3.5 * DAY
            await until(lambda: bodies(hub, number, "remind:"), what="the reminder")
            (reminder,) = bodies(hub, number, "remind:")
            assert "@alice, question 1" in reminder
            assert "has waited 3 days for your answer" in reminder
            assert bodies(hub, number, "closed:") == []

            clock.offset = 15 * DAY
            await until(lambda: bodies(hub, number, "closed:"), what="the job closed")
            (closed,) = bodies(hub, number, "closed:")
            assert "No answer to question 1 in 14 days, so this job is closed" in closed
            assert "comment `/resume`" in closed
            await until(
                lambda: (
                    "**Paused** by TeaParty (no answer in 14 days)"
                    in bodies(hub, number, "job:")[0]
                ),
                what="the tracking comment to show the job closed",
            )

            await hub.comment_as(OWNER, REPO, number, "alice", "/approve")
            await hub.comment_as(OWNER, REPO, number, "alice", "/resume")
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request", limit=90)
            await until(lambda: "✅" in bodies(hub, number, "job:")[0], what="the final edit")
    assert len(bodies(hub, number, "remind:")) == 1
    assert len(bodies(hub, number, "closed:")) == 1
    assert hub.violations == []


async def test_withdraw_mid_task_stops_the_team_and_leaves_no_worktree(tmp_path: Path) -> None:
    """The worker's model call never returns; `/withdraw` stops it, closes every
    conversation and question, and removes the job's worktrees; the branch stays."""
    import asyncio
    import sqlite3

    from orchestrator.api import AgentDef, AssistantTurn, Model, ModelRequest

    hub, port, pem = world(tmp_path)
    demo = DemoModel()
    working = asyncio.Event()

    class Stuck:
        async def complete(self, request: ModelRequest) -> AssistantTurn:
            working.set()
            await asyncio.Event().wait()  # a model that never answers, until cancelled
            raise AssertionError("unreachable")

    def models(agent: AgentDef) -> Model:
        return Stuck() if agent.name == "implementer" else demo

    home = tmp_path / "home"
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, home, pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
        async with in_process(settings, models, port=port, sandbox=NOWHERE) as runtime:
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the question")
            await hub.comment_as(OWNER, REPO, number, "alice", "/approve")
            await until(working.is_set, what="the worker's model call")
            space = await runtime.office.workspace.job(1)
            assert space is not None
            assert space.path.exists()
            order = await hub.comment_as(OWNER, REPO, number, "alice", "/withdraw")
            await until(lambda: hub.comment_reactions(OWNER, REPO, order), what="the 👍")
            await until(lambda: "🛑" in bodies(hub, number, "job:")[0], what="cancelled shown")
            assert hub.comment_reactions(OWNER, REPO, order) == ["+1"]
            assert not space.path.exists()
            assert not list((space.path.parent / "slots").glob("slot-*/*"))
    with sqlite3.connect(home / "teaparty.db") as db:
        assert db.execute("SELECT state FROM jobs").fetchall() == [("withdrawn",)]
        assert db.execute(
            "SELECT count(*) FROM conversations WHERE state = 'active'"
        ).fetchone() == (0,)
        assert db.execute(
            "SELECT count(*) FROM gates WHERE answer IS NULL AND closed_at IS NULL"
        ).fetchone() == (0,)
    assert not hub.pulls(OWNER, REPO)
    assert hub.violations == []


async def test_the_auto_label_from_a_writer_lets_the_proxy_decide(tmp_path: Path) -> None:
    import sqlite3

    hub, port, pem = world(tmp_path)
    hub.add_user("bob", "read")
    home = tmp_path / "home"
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, home, pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
        async with in_process(settings, lambda _: DemoModel(), port=port, sandbox=NOWHERE):
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the question")
            await hub.label_issue(OWNER, REPO, number, "teaparty-auto", sender="bob")
            await hub.label_issue(OWNER, REPO, number, "teaparty-auto", sender="alice")

            def auto() -> list[tuple[int, str]]:
                with sqlite3.connect(home / "teaparty.db") as db:
                    return db.execute("SELECT auto, set_by FROM proxy_jobs").fetchall()

            await until(auto, what="the job's proxy set to decide")
            assert auto() == [(1, "alice")]
    assert hub.violations == []
