"""The App under GitHub's ordinary faults, in this process against the stand-in.

A write GitHub applied before answering 502 happens once; a 90 s secondary rate limit on
opening the pull request is waited out (an injected clock stands in for the 90 s); a label
and a reply given while the App was down are acted on after it starts again (the stand-in
drops failed deliveries, as GitHub does, and the App asks for them again); two
repositories whose issue #1 has the same title get two jobs and two pull requests.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from app_harness import OWNER, REPO, OffsetClock, app_settings, bodies, in_process, until, world

from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

pytestmark = pytest.mark.timeout(180)
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")


async def test_writes_github_applied_before_answering_502_are_made_once(tmp_path: Path) -> None:
    hub, port, pem = world(tmp_path)
    for method, path in [
        ("POST", r"/issues/\d+/comments$"),
        ("PATCH", r"/issues/comments/\d+$"),
        ("POST", r"/issues/\d+/reactions$"),
        ("POST", r"/pulls$"),
    ]:
        hub.fail_next(method, path, 502, apply=True, times=2)
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        demo = DemoModel()
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE):
            number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the question")
            await hub.comment_as(OWNER, REPO, number, "alice", "yes")
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request")
            await until(lambda: "✅" in bodies(hub, number, "job:")[0], what="the final edit")
    assert len(bodies(hub, number, "job:")) == 1
    assert len(bodies(hub, number, "gate:")) == 1
    assert len(hub.pulls(OWNER, REPO)) == 1
    assert len(hub.reactions(OWNER, REPO, number)) == 1
    assert not bodies(hub, number, "failure:")
    assert hub.violations == []


async def test_a_long_secondary_rate_limit_on_the_pull_request_is_waited_out(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    hub.fail_next(
        "POST",
        r"/pulls$",
        403,
        headers={"retry-after": "90"},
        body={"message": "You have exceeded a secondary rate limit. Please wait a few minutes."},
    )
    clock = OffsetClock()
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        demo = DemoModel()
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE, clock=clock):
            number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the question")
            await hub.comment_as(OWNER, REPO, number, "alice", "yes")
            await until(
                lambda: (
                    "**Waiting:** waiting for GitHub's rate limit" in bodies(hub, number, "job:")[0]
                ),
                what="the tracking comment to say it waits",
            )
            await asyncio.sleep(1.0)  # a few sweeps: none of them may try before the reset
            assert hub.pulls(OWNER, REPO) == [], "nothing is tried before the reset"
            clock.offset += 91
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request after the reset")
            await until(lambda: "✅" in bodies(hub, number, "job:")[0], what="the final edit")
    assert not bodies(hub, number, "failure:"), "a rate limit is not a failure"
    assert "Waiting:" not in bodies(hub, number, "job:")[0]
    assert hub.violations == []


async def test_a_label_and_a_reply_given_while_the_app_was_down_are_acted_on(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    home = tmp_path / "home"
    demo = DemoModel()
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, home, pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
        await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")  # nobody listens
        assert hub.deliveries[-1].status is None, "GitHub could not deliver it"

        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE):
            await until(lambda: bodies(hub, number, "gate:"), what="the question, after catch-up")
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")  # the App is down again
        assert hub.deliveries[-1].status is None

        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE):
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request, after catch-up")
            await until(lambda: "✅" in bodies(hub, number, "job:")[0], what="the final edit")
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE) as again:
            assert await again.catchup.once() == [], "nothing is asked for twice"
    assert len(bodies(hub, number, "job:")) == 1
    assert len(bodies(hub, number, "gate:")) == 1
    assert len(hub.pulls(OWNER, REPO)) == 1
    redelivered = [d for d in hub.deliveries if d.redelivery]
    assert {d.status for d in redelivered} == {202}
    assert len({d.delivery_id for d in redelivered}) == len(redelivered), "each asked for once"
    missed = {d.delivery_id for d in hub.deliveries if d.status is None}
    assert missed <= {d.delivery_id for d in redelivered}, "the label and the reply among them"
    assert hub.violations == []


async def test_issue_1_of_two_repositories_with_one_title_gets_two_pull_requests(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    hub.add_repo(OWNER, "gadgets")
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        demo = DemoModel()
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE):
            for repo in (REPO, "gadgets"):
                number = hub.open_issue(OWNER, repo, title="Add docs", body="Docs.", author="alice")
                assert number == 1
                await hub.label_issue(OWNER, repo, number, "teaparty", sender="alice")
            for repo in (REPO, "gadgets"):
                await until(lambda r=repo: bodies(hub, 1, "gate:", r), what=f"{repo}'s question")
                await hub.comment_as(OWNER, repo, 1, "alice", "yes")
            for repo in (REPO, "gadgets"):
                await until(lambda r=repo: hub.pulls(OWNER, r), what=f"{repo}'s pull request")
    heads = {
        repo: [p.pull.head_ref for p in hub.pulls(OWNER, repo) if p.pull]
        for repo in (REPO, "gadgets")
    }
    assert heads == {REPO: ["teaparty/job-1-add-docs"], "gadgets": ["teaparty/job-1-add-docs"]}
    assert hub.violations == []
