"""The engine's side of a job's change request ending, and of a repository the App leaves:
`pull_ended`, `stop_work`, `forget_repository` and `latest_for_key`, over a real store and
real git, with the scripted organisation."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_office import office_fixture
from fakes import FakeForge
from jobs_harness import drive, open_office, start
from local_repo import git, make_repo

from orchestrator.jobs.office import Office
from orchestrator.jobs.pull_lifecycle import forget_repository, pull_ended
from orchestrator.jobs.round_records import Feedback, Point
from orchestrator.jobs.withdraw import stop_work, withdraw

FEEDBACK = Feedback(("bob",), (Point("review:1", "bob", "Say more."),))
PLAN = {"The plan:": "yes"}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


office = office_fixture(open_office)


async def done_with_pull(office: Office, repo: Path, title: str = "Add docs") -> int:
    """A job run to its end, its change request recorded as the App's forge records it."""
    job_id = await start(office, repo, title)
    forge = FakeForge(office, answers=PLAN)  # answers the plan when the driver asks it
    while (state := await drive(office, forge, job_id)) == "waiting":
        pass
    assert state == "done"
    await office.rounds.pull_opened(job_id, 12, "https://example.test/pull/12")
    return job_id


def refs(repo: Path, pattern: str) -> list[str]:
    return git(repo, "for-each-ref", "--format=%(refname:short)", pattern).split()


async def test_a_merge_stops_the_running_round_and_clears_the_work(
    repo: Path, office: Office
) -> None:
    job_id = await done_with_pull(office, repo)
    taken = await office.rounds.feedback(job_id, FEEDBACK)
    assert taken.state == "running"
    space = await office.workspace.job(job_id)
    assert space is not None
    assert refs(space.repo, f"refs/heads/{space.branch}--task-*")
    await office.prepare(job_id)  # the round's worktree is back
    assert space.path.is_dir()

    ended = await pull_ended(office, job_id, "merged")
    assert ended.describe() == (
        f"job {job_id}: pull request merged; the review round that ran was stopped; "
        "1 task branch(es) removed"
    )
    assert ended.branches == (f"{space.branch}--task-1",)
    record = await office.records.job(job_id)
    assert record is not None
    assert record.state == "complete"
    [review] = await office.rounds.of_job(job_id)
    assert (review.state, review.outcome) == (
        "stopped",
        "the pull request was merged while the round ran",
    )
    pull = await office.rounds.pull(job_id)
    assert pull is not None
    assert pull.state == "merged"
    assert await office.engine.bus.runnable() == []
    assert not space.path.exists()
    assert refs(space.repo, f"refs/heads/{space.branch}--task-*") == []
    assert refs(space.repo, f"refs/heads/{space.branch}") == [space.branch]

    again = await pull_ended(office, job_id, "merged")  # a redelivery changes nothing
    assert (again.stopped, again.branches) == (None, ())
    more = Feedback(("bob",), (Point("review:2", "bob", "And this."),))
    later = await office.rounds.feedback(job_id, more)
    assert later.state == "queued", "no round runs on a merged pull request"


async def test_a_close_unmerged_keeps_the_work_and_stops_only_a_waiting_round(
    repo: Path, office: Office
) -> None:
    job_id = await done_with_pull(office, repo)
    await office.rounds.pull_state(job_id, "draft")
    assert (await office.rounds.feedback(job_id, FEEDBACK)).state == "queued"
    space = await office.workspace.job(job_id)
    assert space is not None
    branches = refs(space.repo, f"refs/heads/{space.branch}--task-*")

    ended = await pull_ended(office, job_id, "closed")
    assert ended.describe() == f"job {job_id}: pull request closed"
    [review] = await office.rounds.of_job(job_id)
    assert (review.state, review.outcome) == ("stopped", "the change request was closed")
    assert refs(space.repo, f"refs/heads/{space.branch}--task-*") == branches
    record = await office.records.job(job_id)
    assert record is not None
    assert record.state == "complete"
    await office.rounds.pull_state(job_id, "open")  # reopened: a review starts a round
    more = Feedback(("bob",), (Point("review:2", "bob", "And this."),))
    assert (await office.rounds.feedback(job_id, more)).state == "running"


async def test_stop_work_leaves_a_job_at_rest_alone(repo: Path, office: Office) -> None:
    job_id = await done_with_pull(office, repo)
    assert await stop_work(office, job_id, why="nothing") is None


async def test_a_repository_folder_goes_once_no_running_job_comes_from_it(
    repo: Path, office: Office
) -> None:
    done = await done_with_pull(office, repo)
    running = await start(office, repo, "Add more")
    folder = office.workspace.repo_dir("widgets")
    assert (folder / "mirror.git").is_dir()
    assert await forget_repository(office, "widgets") is None, "a job still runs from it"
    assert folder.is_dir()

    await withdraw(office, running, by="the uninstall")
    assert await forget_repository(office, "widgets") == folder
    assert not folder.exists()
    removed = await office.engine.store.read(
        lambda tx: tx.execute(
            "SELECT job_id, removed FROM job_workspaces ORDER BY job_id"
        ).fetchall()
    )
    assert removed == [(done, 1), (running, 1)]
    assert await forget_repository(office, "widgets") is None, "gone already"
    assert await forget_repository(office, "../../etc") is None


async def test_a_link_out_of_the_state_directory_is_never_followed(
    tmp_path: Path, office: Office
) -> None:
    outside = tmp_path / "precious"
    (outside / "mirror.git").mkdir(parents=True)
    link = office.workspace.repo_dir("github/octo/linked")
    link.parent.mkdir(parents=True)
    link.symlink_to(outside)
    assert await forget_repository(office, "github/octo/linked") is None
    assert (outside / "mirror.git").is_dir()


async def test_an_issues_newest_job_is_found_by_its_first_key(repo: Path, office: Office) -> None:
    first = await start(office, repo, "One", key="github:o/r#1")
    other = await start(office, repo, "Other", key="github:o/r#12")
    found = await office.records.latest_for_key("github:o/r#1")
    assert found is not None
    assert found.job_id == first
    second = await start(office, repo, "Two", key="github:o/r#1/2")
    found = await office.records.latest_for_key("github:o/r#1")
    assert found is not None
    assert (found.job_id, found.job_key) == (second, "github:o/r#1/2")
    twelfth = await office.records.latest_for_key("github:o/r#12")
    assert twelfth is not None
    assert twelfth.job_id == other
    assert await office.records.latest_for_key("github:o/r#2") is None
