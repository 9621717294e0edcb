"""The JobDriver without GitHub: a FakeForge sees a job shown, asked, delivered, or failed.

The same driver serves the App and `teaparty run`; these tests drive it with the demo
model on a real repository and a real store, and restart the Office between a failed
delivery and its retry.
"""

from __future__ import annotations

import time
from pathlib import Path

import demo_office
import pytest
from demo_office import drive, office_fixture, start_job
from fakes import FakeForge, one_forge
from local_repo import make_repo as repository

from orchestrator.core.errors import ForgeError, ForgeWaitError
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge
from orchestrator.workspace.marks import job_mark

TITLE = "Add a changelog"
PROJECT = "humans: {decider: carol}\n"


async def open_office(home: Path) -> Office:
    demo = DemoModel(title=TITLE, body="We need one.", path="docs/requests/changelog.md")
    return await demo_office.open_office(home, PROJECT, demo)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return repository(tmp_path / "widgets")


office = office_fixture(open_office)


async def start(office: Office, repo: Path) -> int:
    return await start_job(office, repo, PROJECT, title=TITLE, body="We need one.")


async def test_a_job_is_shown_asked_once_and_delivered_once(repo: Path, office: Office) -> None:
    forge = FakeForge(office, answers={"The plan:": "yes"})
    job_id = await start(office, repo)
    assert await drive(office, forge, job_id) == "done"
    assert forge.asked == [1]
    assert forge.delivered == [f"teaparty/job-{job_id}-changelog"]
    assert forge.failed == []
    assert forge.shown[0] == "planning"
    assert forge.shown[-1] == "done"
    assert await drive(office, forge, job_id) == "done", "a done job stays done"
    assert len(forge.delivered) == 1


async def test_a_failed_delivery_survives_a_restart_and_is_retried_on_request(
    tmp_path: Path,
) -> None:
    repo, home = repository(tmp_path / "widgets"), tmp_path / "home"
    office = await open_office(home)
    try:
        refused = ForgeError("GitHub answered 422: No commits between main and the branch")
        forge = FakeForge(office, answers={"The plan:": "yes"}, deliver_errors=[refused])
        job_id = await start(office, repo)
        assert await drive(office, forge, job_id) == "failed"
        assert forge.failed == [f"delivering the work failed: {refused}"]
        assert forge.delivered == []
    finally:
        await office.close()

    office = await open_office(home)
    try:
        await office.resume()
        forge = FakeForge(office)
        driver = JobDriver(office, lambda _: _forge(forge))
        status = await driver.status(job_id)
        assert status.state == "failed"
        assert status.error == f"delivering the work failed: {refused}"
        assert await drive(office, forge, job_id) == "failed", "not retried unasked"
        assert forge.delivered == []

        assert await driver.retry(job_id) == [f"delivery:{job_id}"]
        assert await drive(office, forge, job_id) == "done"
        assert forge.delivered == [f"teaparty/job-{job_id}-changelog"]
    finally:
        await office.close()


async def _forge(forge: FakeForge) -> Forge:
    return forge


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_a_rate_limit_holds_the_job_until_the_reset_and_fails_nothing(
    tmp_path: Path,
) -> None:
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home")
    clock = Clock()
    try:
        limit = ForgeWaitError("waiting for GitHub: rate limit for 90s", retry_at=clock.now + 90)
        forge = FakeForge(office, answers={"The plan:": "yes"}, deliver_errors=[limit])
        job_id = await start(office, repo)
        driver = JobDriver(office, lambda _: _forge(forge), clock=clock)
        while await driver.sync(job_id) != "delivering":
            await office.run_until_idle()
        held = await driver.status(job_id)
        assert held.state == "delivering"
        assert "GitHub's rate limit" in (held.waiting or "")
        assert forge.statuses[-1].waiting == held.waiting, "the status says what it waits for"
        assert [w.kind for w in await office.waits(job_id)] == ["forge"]

        clock.now += 60
        assert await driver.sync(job_id) == "delivering"
        assert (forge.delivered, forge.failed) == ([], []), "nothing is tried before the reset"

        clock.now += 31
        assert await driver.sync(job_id) == "done"
        assert forge.delivered == [f"teaparty/job-{job_id}-changelog"]
        assert forge.failed == []
        assert await office.waits(job_id) == []
        assert await office.failures(job_id) == []
    finally:
        await office.close()


async def test_a_job_that_changed_nothing_delivers_nothing(repo: Path, office: Office) -> None:
    forge = FakeForge(office, answers={"The plan:": "no, not now"})
    job_id = await start(office, repo)
    assert await drive(office, forge, job_id) == "done"
    assert forge.delivered == []
    final = forge.statuses[-1]
    assert (final.state, final.link) == ("done", None)
    assert final.result is not None
    assert final.result.startswith("The plan was rejected (decider answered")
    assert [t.state for t in final.tasks] == ["cancelled"], "the lead took its plan back"
    assert "(decider answered 'no, not now')" in final.result


async def test_a_job_whose_workspace_cannot_be_made_fails_at_once_saying_why(
    repo: Path,
    office: Office,
) -> None:
    started = await office.start_job(
        project="widgets",
        key="local:widgets#2",
        title=TITLE,
        brief="b",
        source=demo_office.local_source(repo, "x", start="refs/remotes/origin/no-such-branch"),
        project_text=PROJECT,
    )
    forge = FakeForge(office)
    assert await drive(office, forge, started.job_id) == "failed"
    (reason,) = forge.failed
    assert reason.startswith("the job's workspace failed: cannot start job")
    assert "no-such-branch" in reason
    assert not await office.engine.bus.runnable(), "its agents never ran"


async def test_a_workspace_made_before_a_crash_is_finished_and_the_job_runs(
    tmp_path: Path,
) -> None:
    """A kill between making the worktree and marking the job ready left it never run."""
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home")
    try:
        job_id = await start(office, repo)
        mirror = await office.workspace.mirror("widgets", str(repo))
        await office.workspace.open_job(
            job_id,
            mirror=mirror,
            branch=f"teaparty/job-{job_id}-changelog",
            start="refs/remotes/origin/main",
            slug="changelog",
            mark=job_mark("local:widgets#1"),
        )
        assert not await office.is_ready(job_id)
        forge = FakeForge(office, answers={"The plan:": "yes"})
        assert await drive(office, forge, job_id) == "done"
        assert await office.is_ready(job_id)
        assert forge.delivered == [f"teaparty/job-{job_id}-changelog"]
    finally:
        await office.close()


async def test_a_question_left_open_reminds_closes_once_and_stays_resumable(
    tmp_path: Path,
) -> None:
    """Past `remind_after_days` the forge reminds; past `close_after_days` the job is
    paused once (`closed_idle_at`), and resumed without an answer it is not closed again."""
    repo = repository(tmp_path / "widgets")
    office = await open_office(tmp_path / "home")
    try:
        forge = FakeForge(office, leave_open=True)
        job_id = await start(office, repo)
        later = [time.time()]

        driver = JobDriver(office, one_forge(forge), clock=lambda: later[0])
        while (await driver.sync(job_id)) != "waiting":
            await office.run_until_idle()
        assert (forge.reminded, forge.closed) == ([], [])
        later[0] += 4 * 86400
        assert await driver.sync(job_id) == "waiting"
        assert (forge.reminded, forge.closed) == ([1], [])
        later[0] += 11 * 86400
        await driver.sync(job_id)
        assert forge.closed == [1]
        status = await driver.status(job_id)
        assert status.paused_by == "TeaParty (no answer in 14 days)"
        assert await office.control.resume(job_id)
        await driver.sync(job_id)
        assert await office.control.paused_by(job_id) is None, "closed once for this question"
        assert not await office.control.close_idle(job_id, 1, by="again")
    finally:
        await office.close()


async def test_a_jobs_budget_and_the_projects_remembered_preferences_last(tmp_path: Path) -> None:
    """`/budget` caps one job in place of its project's dollars; `/remember` reaches every
    agent of the project, once per source, and is still there after a restart."""
    repo, home = repository(tmp_path / "widgets"), tmp_path / "home"
    office = await open_office(home)
    try:
        job_id = await start(office, repo)
        assert await office.budget.limits(job_id) == (10.0, None)  # the project's default
        await office.control.set_budget(job_id, 0.5, by="carol")
        assert await office.budget.limits(job_id) == (0.5, None)
        assert await office.remember(job_id, "we use pytest", by="carol", ref="c:1")
        assert not await office.remember(job_id, "we use pytest", by="carol", ref="c:1")
        assert "- we use pytest" in office.agents.spec("widgets/project-lead").system
    finally:
        await office.close()
    office = await open_office(home)
    try:
        lead = office.agents.spec("widgets/project-lead").system
        assert "## What this project's decider asked you to remember\n- we use pytest" in lead
        assert await office.control.preferences() == {"widgets": ["we use pytest"]}
    finally:
        await office.close()
