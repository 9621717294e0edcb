"""A job's life after its pull request, through the App and the local GitHub stand-in.

Each test runs a job to its pull request with the scripted models, then does what people do
on GitHub (merge, close, delete the branch, draft, close the issue, remove the label, label
again, uninstall) and hands the App the webhook the stand-in sent, as the delivery worker
would: merged, the job is complete with its worktrees and task branches gone and its tracking
comment final; closed, it says how to reopen and `/reopen` does; a draft holds a review round
until the pull request is ready; a closed issue or a removed label withdraws a running job,
and the issue a merge closes changes nothing; the label again after a finished job starts
the issue's second job on a branch of its own; an uninstall withdraws and deletes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from app_harness import NOWHERE, OWNER, app_settings, bodies, in_process, make_hub, until
from lifecycle_support import REPO, World, git, source_repo

from bot.demo import free_port, private_key_pem
from orchestrator.api import Delivery, Feedback, Office, Point
from orchestrator.api import models as scripted_models
from orchestrator.workspace.spaces import JobSpace

pytestmark = pytest.mark.timeout(120)
FEEDBACK = Feedback(("bob",), (Point("review:1", "bob", "Please say more in the note."),))


async def pulled(world: World) -> tuple[int, int, int, JobSpace]:
    """Run a job to its pull request: the issue's number, the pull request's, the job's id
    and its workspace."""
    number, pull, job_id = await world.run_to_pull()
    space = await world.runtime.office.workspace.job(job_id)
    assert space is not None
    return number, pull, job_id, space


def task_branches(repo: Path, branch: str) -> list[str]:
    refs = git(repo, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{branch}--task-*")
    return refs.split()


async def test_a_merged_pull_request_completes_the_job_and_clears_its_work(
    lifecycle: World,
) -> None:
    world, hub = lifecycle, lifecycle.hub
    number, pull, job_id, space = await pulled(world)
    assert task_branches(space.repo, space.branch), "the job's tasks had branches"

    await hub.merge_pr(OWNER, REPO, pull, "bob")
    outcome, touched = await world.handle(world.sent("pull_request", "closed"))
    assert (outcome, touched) == (
        f"job {job_id}: pull request merged; 1 task branch(es) removed (by bob)",
        job_id,
    )
    await world.settled()
    assert (await world.job(job_id)).state == "complete"
    found = await world.runtime.office.rounds.pull(job_id)
    assert found is not None
    assert found.state == "merged"
    assert task_branches(space.repo, space.branch) == []  # its worktrees went when it rested
    assert git(space.repo, "rev-parse", "--verify", f"refs/heads/{space.branch}").strip()
    (tracking,) = world.tracking(number)
    assert f"**Pull request:** {hub.server_url}/{OWNER}/{REPO}/pull/{pull} (merged)" in tracking
    assert "The pull request was merged: the job is finished" in tracking
    assert "To retry a stopped job" not in tracking

    # The merge closed the issue (`Closes #N`): that comes after the job rests, and does nothing.
    assert hub.issue(OWNER, REPO, number).state == "closed"
    closed = await world.handle(world.sent("issues", "closed"))
    assert closed == (f"ignored: job {job_id} has ended (complete)", job_id)
    await world.settled()
    assert world.tracking(number) == [tracking]


async def test_a_pull_request_closed_unmerged_says_how_to_reopen_and_reopens(
    lifecycle: World,
) -> None:
    world, hub = lifecycle, lifecycle.hub
    number, pull, job_id, space = await pulled(world)
    branches = task_branches(space.repo, space.branch)

    await hub.close_pr(OWNER, REPO, pull, "bob")
    said = await world.handle(world.sent("pull_request", "closed"))
    assert said == (f"job {job_id}: pull request closed (by bob)", job_id)
    await world.settled()
    assert await pull_state(world, job_id) == "closed"
    assert (await world.job(job_id)).state == "complete"
    assert task_branches(space.repo, space.branch) == branches, "closed, the work is kept"
    (tracking,) = world.tracking(number)
    assert "(closed without merging)" in tracking
    assert f"comment `/reopen` here while its branch `{space.branch}` exists" in tracking

    refused = await hub.comment_as(OWNER, REPO, number, "bob", "/reopen")  # not the decider
    outcome, _ = await world.handle(world.sent("issue_comment", "created"))
    assert outcome == f"ignored: bob may not /reopen job {job_id}"
    assert hub.comment_reactions(OWNER, REPO, refused) == ["confused"]
    assert hub.issue(OWNER, REPO, pull).state == "closed"

    taken = await hub.comment_as(OWNER, REPO, number, "alice", "/reopen")
    outcome, _ = await world.handle(world.sent("issue_comment", "created"))
    assert outcome == f"job {job_id} reopened pull request #{pull} by alice"
    assert hub.comment_reactions(OWNER, REPO, taken) == ["+1"]
    assert hub.issue(OWNER, REPO, pull).state == "open"
    assert await pull_state(world, job_id) == "open"
    # GitHub says the App reopened it: the App's own act, which changes nothing.
    reopened = world.sent("pull_request", "reopened")
    assert world.payload(reopened)["sender"]["login"] == hub.state.bot.login
    outcome, _ = await world.handle(reopened)
    assert outcome.startswith("ignored: pull_request.reopened is ignored: ")
    assert "the app's own account" in outcome
    await world.settled()
    (tracking,) = world.tracking(number)
    assert "(closed without merging)" not in tracking
    assert "`/reopen`" not in tracking


async def test_a_deleted_head_branch_closes_the_job_with_a_comment(lifecycle: World) -> None:
    world, hub = lifecycle, lifecycle.hub
    number, pull, job_id, space = await pulled(world)

    await hub.delete_head_branch(OWNER, REPO, pull, "bob")
    said = await world.handle(world.sent("pull_request", "closed"))
    assert said == (
        f"job {job_id}: pull request closed by deleting its branch; 1 task branch(es) removed"
        " (by bob)",
        job_id,
    )
    await world.settled()
    assert await pull_state(world, job_id) == "gone"
    assert task_branches(space.repo, space.branch) == []
    (comment,) = bodies(hub, number, "pull-gone:", REPO)
    assert f"The branch `{space.branch}` of pull request #{pull} was deleted" in comment
    assert "this job is closed" in comment
    (tracking,) = world.tracking(number)
    assert "(closed: its branch was deleted)" in tracking
    assert "so the job is closed" in tracking
    again = await world.handle(world.sent("pull_request", "closed"))  # a redelivery
    assert again[1] == job_id
    await world.settled()
    assert len(bodies(hub, number, "pull-gone:", REPO)) == 1

    await hub.comment_as(OWNER, REPO, number, "alice", "/reopen")
    outcome, _ = await world.handle(world.sent("issue_comment", "created"))
    assert outcome.startswith(f"ignored: its branch `{space.branch}` was deleted")
    (answer,) = bodies(hub, number, "control:", REPO)
    assert "`/reopen` did nothing: its branch" in answer


async def test_reopen_finds_a_branch_deleted_after_the_close(lifecycle: World) -> None:
    world, hub = lifecycle, lifecycle.hub
    number, pull, job_id = await world.run_to_pull()
    await hub.close_pr(OWNER, REPO, pull, "bob")
    await world.handle(world.sent("pull_request", "closed"))
    await hub.delete_head_branch(OWNER, REPO, pull, "bob")  # closed already: GitHub says nothing
    assert world.sent("pull_request", "closed") == hub.deliveries[-1]
    await hub.comment_as(OWNER, REPO, number, "alice", "/reopen")
    outcome, _ = await world.handle(world.sent("issue_comment", "created"))
    assert "was deleted, so pull request" in outcome
    await world.settled()
    assert await pull_state(world, job_id) == "gone"
    assert hub.issue(OWNER, REPO, pull).state == "closed"
    assert "(closed: its branch was deleted)" in world.tracking(number)[0]


async def test_a_draft_holds_review_rounds_until_it_is_ready(lifecycle: World) -> None:
    world, hub = lifecycle, lifecycle.hub
    office = world.runtime.office
    number, pull, job_id = await world.run_to_pull()

    await hub.set_draft(OWNER, REPO, pull, "bob")
    said = await world.handle(world.sent("pull_request", "converted_to_draft"))
    assert said == (f"job {job_id}: pull request a draft (by bob)", job_id)
    await world.settled()
    assert await pull_state(world, job_id) == "draft"
    assert "review rounds wait until it is ready" in world.tracking(number)[0]
    taken = await office.rounds.feedback(job_id, FEEDBACK)
    assert taken.state == "queued", "no round runs on a draft"
    assert (await world.job(job_id)).state == "complete"

    await hub.set_draft(OWNER, REPO, pull, "bob", draft=False)
    said = await world.handle(world.sent("pull_request", "ready_for_review"))
    assert said == (f"job {job_id}: pull request open (by bob)", job_id)
    assert await pull_state(world, job_id) == "open"
    [review] = await office.rounds.of_job(job_id)
    assert review.state == "running", "ready again, the waiting round starts"
    assert (await world.job(job_id)).state == "active"

    await hub.set_draft(OWNER, REPO, pull, "bob")  # a draft again, while the round runs
    said = await world.handle(world.sent("pull_request", "converted_to_draft"))
    assert said == (f"job {job_id}: pull request a draft, the job paused (by bob)", job_id)
    assert await office.control.paused_by(job_id) == "bob (the pull request is a draft)"
    await world.settled()
    assert "**Paused**: bob made the pull request a draft" in world.tracking(number)[0]
    await hub.set_draft(OWNER, REPO, pull, "bob", draft=False)
    said = await world.handle(world.sent("pull_request", "ready_for_review"))
    assert said == (f"job {job_id}: pull request open, the job resumed (by bob)", job_id)
    assert await office.control.paused_by(job_id) is None

    # A decider's own pause is theirs: a pull request made ready does not release it.
    assert await office.control.pause(job_id, by="alice")
    await hub.set_draft(OWNER, REPO, pull, "bob")
    await world.handle(world.sent("pull_request", "converted_to_draft"))
    await hub.set_draft(OWNER, REPO, pull, "bob", draft=False)
    await world.handle(world.sent("pull_request", "ready_for_review"))
    assert await office.control.paused_by(job_id) == "alice"


async def test_a_merge_while_a_round_runs_stops_the_round_and_completes_the_job(
    lifecycle: World,
) -> None:
    world, hub = lifecycle, lifecycle.hub
    office = world.runtime.office
    number, pull, job_id = await world.run_to_pull()
    taken = await office.rounds.feedback(job_id, FEEDBACK)
    assert taken.state == "running"
    assert (await world.job(job_id)).state == "active"
    await world.runtime.service.driver.sync(job_id)  # the round's worktree is made again
    space = await office.workspace.job(job_id)
    assert space is not None
    assert space.path.is_dir()

    await hub.merge_pr(OWNER, REPO, pull, "bob")
    # GitHub may send the issue's close first: the App asks whether the merge did it.
    closed = await world.handle(world.sent("issues", "closed"))
    assert closed[0].startswith(f"job {job_id}: pull request merged; the review round that ran")
    merged = await world.handle(world.sent("pull_request", "closed"))
    assert merged[0].startswith(f"job {job_id}: pull request merged")
    await world.settled()
    assert (await world.job(job_id)).state == "complete"
    [review] = await office.rounds.of_job(job_id)
    assert (review.state, review.outcome) == (
        "stopped",
        "the pull request was merged while the round ran",
    )
    assert await office.engine.bus.runnable() == []
    assert not space.path.exists()
    assert task_branches(space.repo, space.branch) == []
    assert "(merged)" in world.tracking(number)[0]


async def pull_state(world: World, job_id: int) -> str | None:
    found = await world.runtime.office.rounds.pull(job_id)
    return None if found is None else found.state


async def test_closing_the_issue_of_a_running_job_withdraws_it(lifecycle: World) -> None:
    world, hub = lifecycle, lifecycle.hub
    number = hub.open_issue(OWNER, REPO, title="Add a note", body="Please.", author="alice")
    _, job_id = await world.label(number)
    assert job_id is not None
    await world.settled()  # its workspace is made; nothing of it has run
    space = await world.runtime.office.workspace.job(job_id)
    assert space is not None
    assert space.path.is_dir()

    await hub.close_issue(OWNER, REPO, number, sender="bob")
    outcome, touched = await world.handle(world.sent("issues", "closed"))
    assert touched == job_id
    assert outcome.startswith(f"job {job_id} cancelled: ")
    assert outcome.endswith("(bob closed the issue)")
    await world.settled()
    assert (await world.job(job_id)).state == "withdrawn"
    assert not space.path.exists(), "withdrawn as /withdraw does: its worktrees given back"
    assert "🛑 TeaParty job" in world.tracking(number)[0]
    again = await world.handle(world.sent("issues", "closed"))
    assert again == (f"ignored: job {job_id} has ended (withdrawn)", job_id)


async def test_removing_the_trigger_label_withdraws_a_running_job(lifecycle: World) -> None:
    world, hub = lifecycle, lifecycle.hub
    number = hub.open_issue(OWNER, REPO, title="Add a note", body="Please.", author="alice")
    hub.state.add_label(
        hub.state.repo(OWNER, REPO), hub.issue(OWNER, REPO, number), "bug", actor="alice"
    )
    _, job_id = await world.label(number)
    await hub.unlabel_issue(OWNER, REPO, number, "bug", sender="bob")
    said = await world.handle(world.sent("issues", "unlabeled"))
    assert said == (f"ignored: label 'bug' did not start job {job_id}", job_id)
    assert (await world.job(job_id or 0)).state == "active"

    await hub.unlabel_issue(OWNER, REPO, number, "teaparty", sender="bob")
    outcome, _ = await world.handle(world.sent("issues", "unlabeled"))
    assert outcome.startswith(f"job {job_id} cancelled: ")
    assert outcome.endswith("(bob removed the `teaparty` label)")
    assert (await world.job(job_id or 0)).state == "withdrawn"


async def test_the_label_again_after_a_finished_job_starts_the_issues_second_job(
    lifecycle: World,
) -> None:
    world, hub = lifecycle, lifecycle.hub
    office = world.runtime.office
    number, pull, first = await world.run_to_pull()

    # While the job's pull request is open, the label again starts nothing new.
    await hub.unlabel_issue(OWNER, REPO, number, "teaparty", sender="alice")
    said = await world.handle(world.sent("issues", "unlabeled"))
    assert said == (f"ignored: job {first} has ended (complete)", first)
    said = await world.label(number)
    assert said == (
        f"job {first} is done and its pull request #{pull} is open: review it there",
        first,
    )

    await hub.close_pr(OWNER, REPO, pull, "alice")
    await world.handle(world.sent("pull_request", "closed"))
    await hub.unlabel_issue(OWNER, REPO, number, "teaparty", sender="alice")
    await world.handle(world.sent("issues", "unlabeled"))
    outcome, second = await world.label(number)
    assert (outcome, second) == (f"job {second}", second)
    assert second is not None
    assert second != first
    record = await world.job(second)
    assert record.job_key == f"github:{OWNER}/{REPO}#{number}/2"
    assert await world.run(second) == "done"
    space = await office.workspace.job(second)
    assert space is not None
    assert space.branch == f"teaparty/job-{number}-2-add-a-note"
    pulls = hub.pulls(OWNER, REPO)
    assert [p.number for p in pulls] == [pull, pulls[-1].number]
    assert pulls[-1].pull is not None
    assert pulls[-1].pull.head_ref == space.branch
    assert (await office.rounds.pull(second)) is not None
    first_tracking, second_tracking = world.tracking(number)
    assert f"TeaParty job {first}: done" in first_tracking
    assert "(closed without merging)" in first_tracking
    assert f"TeaParty job {second}: done" in second_tracking
    assert f"`{space.branch}`" in second_tracking

    # Comments now reach the issue's newest job: `/reopen` names the second's pull request.
    await hub.comment_as(OWNER, REPO, number, "alice", "/reopen")
    outcome, touched = await world.handle(world.sent("issue_comment", "created"))
    assert touched == second
    assert f"pull request #{pulls[-1].number}" in outcome


async def test_an_uninstall_withdraws_the_jobs_and_deletes_the_repository_folder(
    lifecycle: World, payload: Callable[[str], dict[str, Any]]
) -> None:
    world, hub = lifecycle, lifecycle.hub
    _, _, done = await world.run_to_pull()
    number = hub.open_issue(OWNER, REPO, title="Add another", body="Please.", author="alice")
    _, running = await world.label(number)
    assert running is not None
    await world.settled()
    folder = world.home / "repos" / "github" / OWNER / REPO
    assert (folder / "mirror.git").is_dir()
    writes = sum(r.method != "GET" for r in hub.requests)

    deleted = payload("installation.deleted")  # a real delivery, naming our repository
    deleted["installation"]["id"] = 1
    deleted["repositories"][0] |= {"name": REPO, "full_name": f"{OWNER}/{REPO}"}
    body = json.dumps(deleted).encode()
    outcome, _ = await world.runtime.service.handle(
        Delivery("uninstall", "installation", "deleted", body, 0)
    )
    assert outcome == (
        f"the App left {OWNER}/{REPO}: 1 job(s) withdrawn, 1 repository folder(s) deleted"
    )
    assert (await world.job(running)).state == "withdrawn"
    assert (await world.job(done)).state == "complete"
    assert not folder.exists()
    await world.settled()
    assert sum(r.method != "GET" for r in hub.requests) == writes, "nothing is posted"


async def test_served_a_merge_arrives_as_webhooks_and_completes_the_job(tmp_path: Path) -> None:
    """The same, with the App serving: the stand-in delivers its webhooks over HTTP."""
    pem, port = private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem)
    hub.add_repo(OWNER, REPO, source=source_repo(tmp_path / "src"))
    hub.add_user("alice", "admin")
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem)
        models = scripted_models("scripted", {})
        async with in_process(settings, models, port=port, sandbox=NOWHERE) as runtime:
            office = runtime.office
            number = hub.open_issue(OWNER, REPO, title="Add a note", body="Please.", author="alice")
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request")
            (pull,) = hub.pulls(OWNER, REPO)
            job = await office.records.latest_for_key(f"github:{OWNER}/{REPO}#{number}")
            assert job is not None
            await until(lambda: _rests(office, job.job_id), what="the job to rest")
            space = await office.workspace.job(job.job_id)
            assert space is not None

            await hub.merge_pr(OWNER, REPO, pull.number, "alice")
            merged, closed = hub.deliveries[-2:]
            assert [(d.event, d.action) for d in (merged, closed)] == [
                ("pull_request", "closed"),
                ("issues", "closed"),
            ]
            for delivery in (merged, closed):
                await until(partial(_handled, office, delivery.delivery_id), what="handling")
            record = await office.deliveries.get(closed.delivery_id)
            assert record is not None
            assert record.outcome == f"ignored: job {job.job_id} has ended (complete)"
            await until(
                lambda: "(merged)" in bodies(hub, number, "job:", REPO)[0],
                what="the tracking comment to say the pull request was merged",
            )
            assert (await office.records.job(job.job_id)) == replace(job, state="complete")
            assert task_branches(space.repo, space.branch) == []
    assert hub.violations == [], hub.violations


async def _rests(office: Office, job_id: int) -> bool:
    record = await office.records.job(job_id)
    return record is not None and record.state == "complete"


async def _handled(office: Office, delivery_id: str) -> bool:
    record = await office.deliveries.get(delivery_id)
    return record is not None and record.state == "done"
