"""Down for longer than GitHub keeps deliveries: the App reads what it missed from the issues.

GitHub keeps three days of webhook deliveries. After four days down, asking for them again
finds nothing in reach, so on start the App looks for open issues that carry the trigger
label and have no job, and for the replies to the questions its jobs are parked at.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from app_harness import (
    OWNER,
    REPO,
    OffsetClock,
    app_settings,
    bodies,
    in_process,
    until,
    world,
)

from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

pytestmark = pytest.mark.timeout(180)
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
DAY = 86400.0


async def test_a_label_and_a_reply_older_than_the_delivery_history_are_acted_on(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    hub.add_user("bob", "read")
    days_later = OffsetClock()
    demo = DemoModel()
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
        unlabelled = hub.open_issue(
            OWNER, REPO, title="Other", body="Not for the bot.", author="bob"
        )
        await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")  # nobody listens
        await hub.label_issue(OWNER, REPO, unlabelled, "bug", sender="alice")

        days_later.offset = 4 * DAY
        async with in_process(
            settings, lambda _: demo, port=port, sandbox=NOWHERE, clock=days_later
        ):
            await until(lambda: bodies(hub, number, "gate:"), what="the question, from the label")
        await hub.comment_as(OWNER, REPO, number, "bob", "no")  # not the decider
        await hub.comment_as(OWNER, REPO, number, "alice", "yes")  # the App is down again

        days_later.offset = 8 * DAY
        async with in_process(
            settings, lambda _: demo, port=port, sandbox=NOWHERE, clock=days_later
        ):
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request, from the reply")
            await until(lambda: "✅" in bodies(hub, number, "job:")[0], what="the final edit")
        async with in_process(
            settings, lambda _: demo, port=port, sandbox=NOWHERE, clock=days_later
        ) as again:
            assert await again.catchup.everything() == [], "nothing is read twice"
            jobs = await again.office.records.linked("github", active=False)
    assert len(jobs) == 1, "one job, for the labelled issue"
    assert len(bodies(hub, number, "job:")) == 1
    assert len(bodies(hub, number, "gate:")) == 1
    assert len(hub.pulls(OWNER, REPO)) == 1
    assert hub.comments(OWNER, REPO, unlabelled) == []
    assert not [d for d in hub.deliveries if d.redelivery], "the history was out of reach"
    assert hub.violations == []
