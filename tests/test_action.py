"""`teaparty action` end to end: each workflow run a separate process given only its event
file and the environment a runner gives, against the local GitHub stand-in and its bare
remote, with GITHUB_TOKEN (an installation token of the stand-in)."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest
from action_harness import (
    CHANGELOG,
    NO_PLAN,
    act,
    delivered,
    labelled,
    last,
    preserved_refs,
    runner_hub,
    state_saves,
)
from app_harness import APP_ID, OWNER, REPO, bodies

from bot.demo import private_key_pem
from bot.fakehub.hub import FakeGitHub
from bot.runner.action import continuation_target

pytestmark = pytest.mark.timeout(180)


async def test_a_label_and_the_deciders_answer_are_two_runs_that_end_in_one_pull_request(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number = await labelled(hub, "Add a changelog", "Please.")
        first = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert first.code == 0, first.output
        assert len(bodies(hub, number, "gate:")) == 1, first.output  # the plan, asked
        assert "Job 1" in first.summary
        assert "waiting" in first.summary
        assert "Transcripts are not shown here" in first.summary  # by default: public runs
        used = re.search(r"GitHub API: (\d+) request\(s\) this run; ([\d,]+) of 5,000 left until"
                         r" \d\d:\d\d UTC", first.summary)  # fmt: skip
        assert used is not None, first.summary
        assert 0 < int(used[1]) < 40, "a run that starts a job and asks its plan"

        await hub.comment_as(OWNER, REPO, number, "alice", "yes")
        second = await act(hub, api_url, tmp_path, "issue_comment", last(hub, "issue_comment"))
        assert second.code == 0, second.output
        assert len(hub.pulls(OWNER, REPO)) == 1, second.output
        (tracking,) = bodies(hub, number, "job:")
        assert "✅" in tracking
        saves = state_saves(hub)
        assert [s.split(" (run")[0] for s in saves] == [  # one save per run, newest first
            "TeaParty: issue_comment",
            "TeaParty: issues",
        ]

        # The App's own comments come back as events (GitHub sends them): those runs exit
        # at once, before loading anything.
        mine = json.loads(last(hub, "issue_comment"))
        mine["comment"]["user"] |= {"login": hub.state.bot.login, "type": "Bot"}
        own = json.dumps(mine).encode()
        third = await act(hub, api_url, tmp_path, "issue_comment", own)
        assert third.code == 0
        assert "the app's own account" in third.output
    assert hub.violations == [], hub.violations


async def test_a_run_near_its_time_limit_parks_and_its_continuation_finishes_the_job(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": NO_PLAN})
        number = await labelled(hub, "Add a changelog", "Please.")
        near = "10.0001"  # its deadline (10 minutes before the limit) passes as it starts
        first = await act(
            hub, api_url, tmp_path, "issues", last(hub, "issues"), TEAPARTY_TIMEOUT_MINUTES=near
        )
        assert first.code == 0, first.output
        assert hub.pulls(OWNER, REPO) == []  # parked before the work was done
        assert hub.state.workflow_dispatches == [
            {
                "repository": f"{OWNER}/{REPO}",
                "workflow": "teaparty.yml",
                "ref": "refs/heads/main",
                "inputs": {},
            }
        ]
        assert "its continuation (teaparty.yml@refs/heads/main) goes on" in first.summary

        carry_on = json.dumps({"ref": "refs/heads/main", "inputs": {}}).encode()
        second = await act(hub, api_url, tmp_path, "workflow_dispatch", carry_on)
        assert second.code == 0, second.output
        assert len(hub.pulls(OWNER, REPO)) == 1, second.output
        assert "✅" in bodies(hub, number, "job:")[0]
        assert len(hub.state.workflow_dispatches) == 1  # finished: no second continuation
    assert hub.violations == [], hub.violations


async def test_a_reply_whose_run_never_started_is_read_by_the_next_run(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number = await labelled(hub, "Add a changelog", "Please.")
        first = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert first.code == 0, first.output
        assert len(bodies(hub, number, "gate:")) == 1
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")  # its run is dropped
        other = await labelled(hub, "Add a licence", "MIT.")
        later = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert later.code == 0, later.output
        assert len(hub.pulls(OWNER, REPO)) == 1, later.output  # the reply was taken
        assert "✅" in bodies(hub, number, "job:")[0]
        assert len(bodies(hub, other, "gate:")) == 1  # and the new job asks its plan
    assert hub.violations == [], hub.violations


async def test_a_repository_that_lets_no_workflow_open_pull_requests_is_explained(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    refusal = {
        "message": "GitHub Actions is not permitted to create or approve pull requests.",
        "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request",
    }
    async with hub.serve() as api_url:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": NO_PLAN})
        number = await labelled(hub, "Add a changelog", "Please.")
        hub.fail_next("POST", r"/repos/octo/widgets/pulls$", 403, body=refusal)
        run = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert run.code == 0, run.output
        assert hub.pulls(OWNER, REPO) == []
        (tracking,) = bodies(hub, number, "job:")
        assert "Allow GitHub Actions to create and approve pull requests" in tracking
        assert "failed" in run.summary
    assert hub.violations == [], hub.violations


def test_a_continuation_runs_its_workflow_on_a_branch_never_on_a_pull_requests_merge_ref() -> None:
    ref = f"{OWNER}/{REPO}/.github/workflows/teaparty.yml"
    assert continuation_target(f"{ref}@refs/heads/main", default="main") == (
        "teaparty.yml",
        "refs/heads/main",
    )
    assert continuation_target(f"{ref}@refs/pull/7/merge", default="trunk") == (
        "teaparty.yml",
        "refs/heads/trunk",
    )
    assert continuation_target(f"{ref}@refs/pull/7/merge", default="") is None
    assert continuation_target("", default="main") is None
    assert continuation_target(f"{OWNER}/{REPO}/README.md@refs/heads/main", default="m") is None


async def test_two_runs_started_together_on_one_issue_apply_both_events_once(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number = await labelled(hub, "Add a changelog", "Please.")
        first = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert first.code == 0, first.output
        await hub.comment_as(OWNER, REPO, number, "alice", "/steer Use British spelling.")
        british = last(hub, "issue_comment")
        await hub.comment_as(OWNER, REPO, number, "alice", "/steer Keep it short.")
        short = last(hub, "issue_comment")
        both = await asyncio.gather(
            act(hub, api_url, tmp_path, "issue_comment", british),
            act(hub, api_url, tmp_path, "issue_comment", short),
        )
        # each run's last lines: the error, if one failed (the whole output is cut short)
        assert [run.code for run in both] == [0, 0], [run.output[-2000:] for run in both]
        await hub.comment_as(OWNER, REPO, number, "alice", "/status")
        status = await act(hub, api_url, tmp_path, "issue_comment", last(hub, "issue_comment"))
        assert status.code == 0, status.output
        (tracking,) = bodies(hub, number, "job:")
        assert tracking.count("Use British spelling.") == 1, tracking
        assert tracking.count("Keep it short.") == 1, tracking
        assert len(state_saves(hub)) == 4  # one save per run: none lost, none twice
    assert hub.violations == [], hub.violations


async def test_a_review_round_and_the_merge_run_as_in_app_mode(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number, pr = await delivered(hub, api_url, tmp_path)
        await hub.review_pr(
            OWNER,
            REPO,
            pr,
            "alice",
            "changes_requested",
            "One thing.",
            comments=[(CHANGELOG, 1, "Title case?")],
        )
        review = await act(
            hub, api_url, tmp_path, "pull_request_review", last(hub, "pull_request_review")
        )
        assert review.code == 0, review.output
        tracking = bodies(hub, number, "job:")[0]
        assert "round 1 (`@alice`): 2 point(s), 2 answered; pushed" in tracking, tracking
        assert len(hub.pulls(OWNER, REPO)) == 1
        summaries = [c.body for c in hub.comments(OWNER, REPO, pr) if "teaparty:round:" in c.body]
        assert len(summaries) == 1

        await hub.merge_pr(OWNER, REPO, pr, "alice")
        merged = await act(hub, api_url, tmp_path, "pull_request", last(hub, "pull_request"))
        assert merged.code == 0, merged.output
        assert "(merged)" in bodies(hub, number, "job:")[0]
        work = preserved_refs(hub)
        assert work == ""  # the ended job's preserved work is forgotten
    assert hub.violations == [], hub.violations


async def test_a_review_whose_run_never_started_is_read_by_the_next_run(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number, pr = await delivered(hub, api_url, tmp_path)
        await hub.review_pr(  # its run is dropped
            OWNER, REPO, pr, "alice", "changes_requested", "One thing.",
            comments=[(CHANGELOG, 1, "Title case?")],
        )  # fmt: skip
        dropped = last(hub, "pull_request_review")
        await labelled(hub, "Add a licence", "MIT.")
        later = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert later.code == 0, later.output
        tracking = bodies(hub, number, "job:")[0]
        assert "round 1 (`@alice`): 2 point(s), 2 answered; pushed" in tracking, tracking

        # The dropped run starts after all (a queue let it through late): nothing twice.
        late = await act(hub, api_url, tmp_path, "pull_request_review", dropped)
        assert late.code == 0, late.output
        assert "handled already: an earlier run read it from GitHub" in late.summary
        rounds = [c for c in hub.comments(OWNER, REPO, pr) if "teaparty:round:" in c.body]
        assert len(rounds) == 1
        assert "round 2" not in bodies(hub, number, "job:")[0]
    assert hub.violations == [], hub.violations


async def test_lone_review_comments_are_gathered_within_one_run(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    project = NO_PLAN + "rounds: {window_s: 3}\n"
    async with hub.serve() as api_url:
        number, pr = await delivered(hub, api_url, tmp_path, project)
        await hub.comment_as(OWNER, REPO, pr, "alice", "/teaparty add a date")  # dropped
        await hub.review_pr(OWNER, REPO, pr, "alice", "commented", None,
                            comments=[(CHANGELOG, 1, "Title case?")])  # fmt: skip
        lone = await act(
            hub, api_url, tmp_path, "pull_request_review", last(hub, "pull_request_review")
        )
        assert lone.code == 0, lone.output
        # the run serves the job's project again to read its window (3 s), not the default 90
        # (on a loaded machine the window may have passed before the run starts: no wait)
        waits = [float(w) for w in re.findall(r"a delivery is due in (\d+) s", lone.output)]
        assert all(wait <= 3 for wait in waits), lone.output
        tracking = bodies(hub, number, "job:")[0]
        assert "round 1 (`@alice`): 2 point(s), 2 answered; pushed" in tracking, tracking
        assert "round 2" not in tracking
    assert hub.violations == [], hub.violations


async def test_runs_with_app_credentials_act_as_the_app(tmp_path: Path) -> None:
    """App-token mode: the run finds the App's installation on the repository, and its
    comments, pull request and state saves are the App's, so they start CI."""
    pem = private_key_pem()
    hub = runner_hub(tmp_path, pem)
    as_app = {"GITHUB_APP_ID": str(APP_ID), "GITHUB_APP_PRIVATE_KEY": pem, "GITHUB_TOKEN": ""}
    async with hub.serve() as api_url:
        number = await labelled(hub, "Add a changelog", "Please.")
        first = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"), **as_app)
        assert first.code == 0, first.output
        (gate,) = [c for c in hub.comments(OWNER, REPO, number) if "teaparty:gate:" in c.body]
        assert gate.author == hub.state.bot.login  # the App's `{slug}[bot]`
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")
        second = await act(
            hub, api_url, tmp_path, "issue_comment", last(hub, "issue_comment"), **as_app
        )
        assert second.code == 0, second.output
        (pull,) = hub.pulls(OWNER, REPO)
        assert pull.author == hub.state.bot.login
        assert len(state_saves(hub)) == 2
    assert hub.violations == [], hub.violations


async def test_a_merge_whose_run_never_started_ends_its_job_in_the_next_run(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number, pr = await delivered(hub, api_url, tmp_path)
        await hub.merge_pr(OWNER, REPO, pr, "alice")  # its run is dropped
        dropped = last(hub, "pull_request")
        await labelled(hub, "Add a licence", "MIT.")
        later = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert later.code == 0, later.output
        assert "(merged)" in bodies(hub, number, "job:")[0]
        assert not [ref for ref in preserved_refs(hub).splitlines() if "/work/1/" in ref]

        late = await act(hub, api_url, tmp_path, "pull_request", dropped)
        assert late.code == 0, late.output
        assert "handled already: an earlier run read it from GitHub" in late.summary
    assert hub.violations == [], hub.violations


async def test_a_label_whose_run_never_started_starts_its_job_in_the_next_run(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        first = await labelled(hub, "Add a changelog", "Please.")
        assert (await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))).code == 0
        second = await labelled(hub, "Add a licence", "MIT.")  # its run is dropped
        dropped = last(hub, "issues")
        await hub.comment_as(OWNER, REPO, first, "alice", "yes")
        reply = await act(hub, api_url, tmp_path, "issue_comment", last(hub, "issue_comment"))
        assert reply.code == 0, reply.output
        assert len(hub.pulls(OWNER, REPO)) == 1, reply.output
        assert len(bodies(hub, second, "gate:")) == 1, reply.output  # its plan, asked
        assert "Job 2" in reply.summary

        late = await act(hub, api_url, tmp_path, "issues", dropped)
        assert late.code == 0, late.output
        assert len(bodies(hub, second, "job:")) == 1  # one job, one tracking comment
        assert len(bodies(hub, second, "gate:")) == 1
    assert hub.violations == [], hub.violations


async def test_closes_whose_runs_never_started_are_read_by_the_next_run(tmp_path: Path) -> None:
    """An issue closed while its job waits withdraws the job; a pull request closed unmerged
    closes its job: both read by a later run, each once."""
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number, pr = await delivered(hub, api_url, tmp_path)
        await hub.close_pr(OWNER, REPO, pr, "alice")  # its run is dropped
        dropped = last(hub, "pull_request")
        asks = "humans: {decider: alice}\n"  # the plan is asked again
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": asks})
        waiting = await labelled(hub, "Add a licence", "MIT.")
        assert (await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))).code == 0
        assert len(bodies(hub, waiting, "gate:")) == 1
        assert "(closed" in bodies(hub, number, "job:")[0], bodies(hub, number, "job:")[0]
        late = await act(hub, api_url, tmp_path, "pull_request", dropped)
        assert "handled already: an earlier run read it from GitHub" in late.summary

        await hub.close_issue(OWNER, REPO, waiting, sender="alice")  # its run is dropped
        await labelled(hub, "Add a readme", "Short.")
        third = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert third.code == 0, third.output
        tracking = bodies(hub, waiting, "job:")[0]
        assert "TeaParty job 2: cancelled" in tracking, tracking  # withdrawn by the close
    assert hub.violations == [], hub.violations


def saved_read_mark(hub: FakeGitHub, tmp: Path) -> float | None:
    """The read mark in the store saved on the state ref of the stand-in's remote."""
    remote = hub.root / OWNER / f"{REPO}.git"
    db = tmp / "saved.db"
    db.write_bytes(
        subprocess.run(
            ["git", "-C", str(remote), "show", "refs/teaparty/state:teaparty.db"],
            check=True,
            capture_output=True,
        ).stdout
    )
    with sqlite3.connect(db) as conn:
        row = conn.execute("SELECT max(read_at) FROM read_marks").fetchone()
    db.unlink()
    return None if row[0] is None else float(row[0])


async def test_a_run_that_could_not_read_a_job_leaves_the_read_mark_where_it_was(
    tmp_path: Path,
) -> None:
    """What a run could not read (GitHub refused one job's comments) is read by the next run
    from the same mark, not passed by."""
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        first = await labelled(hub, "Add a changelog", "Please.")
        assert (await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))).code == 0
        mark = saved_read_mark(hub, tmp_path)
        assert mark is not None
        await labelled(hub, "Add a licence", "MIT.")
        hub.fail_next("GET", rf"/repos/{OWNER}/{REPO}/issues/{first}/comments$", 404)
        run = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert run.code == 0, run.output
        assert "Job 2" in run.summary  # the run's own event went ahead
        assert "not read this run: job 1" in run.output
        assert saved_read_mark(hub, tmp_path) == mark
        again = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert again.code == 0, again.output
        assert saved_read_mark(hub, tmp_path) > mark  # read whole: the mark moves on
    assert hub.violations == [], hub.violations


async def test_the_next_run_reads_a_reply_since_its_read_mark_and_moves_the_mark_on(
    tmp_path: Path,
) -> None:
    """The catch-up asks GitHub for comments since the read mark in the format GitHub
    documents: GitHub refuses `since=2026-11-27 23:30:59.507251+00:00` with 422, the run
    then read nothing ('not read this run') and its mark never moved."""
    hub = runner_hub(tmp_path)
    async with hub.serve() as api_url:
        number = await labelled(hub, "Add a changelog", "Please.")
        first = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert first.code == 0, first.output
        mark = saved_read_mark(hub, tmp_path)
        assert mark is not None
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")  # its run is dropped
        carry_on = json.dumps({"ref": "refs/heads/main", "inputs": {}}).encode()
        later = await act(hub, api_url, tmp_path, "workflow_dispatch", carry_on)
        assert later.code == 0, later.output
        assert "not read this run" not in later.output
        assert saved_read_mark(hub, tmp_path) > mark
        assert len(hub.pulls(OWNER, REPO)) == 1, later.output  # the reply was read
    asked = [r.query["since"] for r in hub.requests if "since" in r.query]
    assert asked, "the catch-up asked for comments since its mark"
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", at) for at in asked), asked
    assert hub.violations == [], hub.violations
