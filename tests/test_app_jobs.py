"""`teaparty jobs` beside a running `teaparty serve`: it reads the store the App holds, and a
cancel is a command row the App carries out: the job stops, and its issue says so."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from app_harness import OWNER, REPO, bodies, serve, server_env, until, world
from jobs_cli_support import jobs_json, teaparty

pytestmark = pytest.mark.timeout(180)


async def test_a_github_job_is_read_and_cancelled_beside_the_app(tmp_path: Path) -> None:
    hub, port, pem = world(tmp_path)
    home = tmp_path / "home"
    async with hub.serve() as api_url:
        env = server_env(hub, api_url, home, pem)
        async with serve(env, port=port, log=tmp_path / "server.log"):
            number = hub.open_issue(
                OWNER, REPO, title="Add a changelog", body="Please.", author="alice"
            )
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the plan question")

            [job] = await asyncio.to_thread(jobs_json, "list", home=home)
            assert (job["origin"], job["repository"], job["issue"]) == ("github", "octo/widgets", 1)
            assert (job["state"], job["open_gates"]) == ("waiting", 1)
            listed = await asyncio.to_thread(teaparty, "jobs", "list", home=home)
            assert "octo/widgets#1" in listed.stdout
            answered = await asyncio.to_thread(teaparty, "jobs", "answer", "1", "yes", home=home)
            assert (answered.returncode, answered.stderr) == (
                1,
                "teaparty jobs answer: job 1 is a GitHub job: its questions are answered on the "
                "issue, octo/widgets#1, by the decider's reply\n",
            )

            cancelled = await asyncio.to_thread(teaparty, "jobs", "cancel", "1", home=home)
            assert cancelled.returncode == 0, cancelled.stderr
            assert cancelled.stdout.endswith("(by the teaparty process holding the store)\n")
            await until(
                lambda: "🛑 TeaParty job 1: cancelled" in bodies(hub, number, "job:")[0],
                what="the tracking comment to say the job was cancelled",
            )
            await hub.comment_as(OWNER, REPO, number, "alice", "yes")  # too late: it is closed
            await asyncio.sleep(1.0)  # room for a (wrong) answer to start work
            shown = await asyncio.to_thread(jobs_json, "show", "1", home=home)
            assert shown["state"] == "cancelled"
            assert [(g["state"], g["answer"]) for g in shown["gates"]] == [("closed", None)]
            assert hub.pulls(OWNER, REPO) == []
    assert hub.violations == [], hub.violations
