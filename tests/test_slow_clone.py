"""A repository whose first clone hangs holds up its own job only, not other repositories' gates.

The stand-in's `octo/stuck` has a loose ref that is a FIFO: GitHub's contents API still
answers (it reads one ref), but any fetch hangs while the ref advertisement opens the FIFO.
The job on `octo/widgets`, labelled after it, must get its question asked, answered by the
decider and its pull request opened while the stuck clone still hangs.
"""

from __future__ import annotations

import os
from pathlib import Path

from app_harness import OWNER, REPO, app_settings, in_process, make_hub, until

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub
from bot.github.tracking import MARKER_PREFIX
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

STUCK = "stuck"
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")


async def test_a_hanging_clone_does_not_delay_another_repositorys_gate(tmp_path: Path) -> None:
    pem, port = private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem)
    hub.add_repo(OWNER, STUCK)
    os.mkfifo(hub.root / OWNER / f"{STUCK}.git" / "refs" / "heads" / "zz-hangs")
    hub.add_user("alice", "admin")
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.5)
        demo = DemoModel()
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE) as runtime:
            stuck = hub.open_issue(OWNER, STUCK, title="Stuck", body="x", author="alice")
            await hub.label_issue(OWNER, STUCK, stuck, "teaparty", sender="alice")
            await until(lambda: tracked(hub, STUCK, stuck), what="the stuck job's tracking comment")

            number = hub.open_issue(OWNER, REPO, title="Add docs", body="Docs.", author="alice")
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: asked(hub, REPO, number), what="the other job's question")
            await hub.comment_as(OWNER, REPO, number, "alice", "yes")
            await until(lambda: hub.pulls(OWNER, REPO), what="the other job's pull request")

            stuck_job = await runtime.office.records.job_for_key(f"github:{OWNER}/{STUCK}#1")
            assert stuck_job is not None
            assert await runtime.office.workspace.job(stuck_job.job_id) is None, "still cloning"
    assert hub.violations == []


def tracked(hub: FakeGitHub, repo: str, number: int) -> bool:
    return any(MARKER_PREFIX + "job:" in c.body for c in hub.comments(OWNER, repo, number))


def asked(hub: FakeGitHub, repo: str, number: int) -> bool:
    return any(MARKER_PREFIX + "gate:" in c.body for c in hub.comments(OWNER, repo, number))
