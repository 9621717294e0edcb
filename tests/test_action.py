"""`teaparty action` end to end: each workflow run a separate process given only its event
file and the environment a runner gives, against the local GitHub stand-in and its bare
remote, with GITHUB_TOKEN (an installation token of the stand-in)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import pytest
from app_harness import APP_ID, OWNER, REPO, bodies, make_hub

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub

pytestmark = pytest.mark.timeout(180)
RUNS = count(9_000_001)


@dataclass
class Run:
    code: int
    output: str
    summary: str


async def act(hub: FakeGitHub, api_url: str, tmp: Path, event: str, body: bytes) -> Run:
    """One workflow run of `event` whose payload is `body`."""
    run_id = next(RUNS)
    folder = tmp / f"run-{run_id}"
    folder.mkdir()
    (folder / "event.json").write_bytes(body)
    token = hub.state.issue_token(
        1,
        permissions={
            "issues": "write",
            "contents": "write",
            "pull_requests": "write",
            "metadata": "read",
        },
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env |= {
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(folder / "event.json"),
        "GITHUB_REPOSITORY": f"{OWNER}/{REPO}",
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": hub.server_url,
        "GITHUB_TOKEN": token.token,
        "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
        "TEAPARTY_BOT_LOGIN": hub.state.bot.login,
        "TEAPARTY_BOT_APP_ID": str(APP_ID),
        "TEAPARTY_HOME": str(tmp / "home"),
    }
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "action",
        env=env,
        cwd=folder,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    summary = folder / "summary.md"
    return Run(
        process.returncode or 0, out.decode(), summary.read_text() if summary.exists() else ""
    )


def last(hub: FakeGitHub, event: str) -> bytes:
    return next(d.body for d in reversed(hub.deliveries) if d.event == event)


async def test_a_label_and_the_deciders_answer_are_two_runs_that_end_in_one_pull_request(
    tmp_path: Path,
) -> None:
    hub = make_hub(tmp_path / "hub", port=free_port(), pem=private_key_pem())
    hub.add_user("alice", "admin")
    async with hub.serve() as api_url:
        number = hub.open_issue(
            OWNER, REPO, title="Add a changelog", body="Please.", author="alice"
        )
        await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
        first = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert first.code == 0, first.output
        assert len(bodies(hub, number, "gate:")) == 1, first.output  # the plan, asked
        assert "Job 1" in first.summary
        assert "waiting" in first.summary

        await hub.comment_as(OWNER, REPO, number, "alice", "yes")
        second = await act(hub, api_url, tmp_path, "issue_comment", last(hub, "issue_comment"))
        assert second.code == 0, second.output
        assert len(hub.pulls(OWNER, REPO)) == 1, second.output
        (tracking,) = bodies(hub, number, "job:")
        assert "✅" in tracking

        # The App's own comments come back as events (GitHub sends them): those runs exit
        # at once, before loading anything.
        mine = json.loads(last(hub, "issue_comment"))
        mine["comment"]["user"] |= {"login": hub.state.bot.login, "type": "Bot"}
        own = json.dumps(mine).encode()
        third = await act(hub, api_url, tmp_path, "issue_comment", own)
        assert third.code == 0
        assert "the app's own account" in third.output
    assert hub.violations == [], hub.violations
