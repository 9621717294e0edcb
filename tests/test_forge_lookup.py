"""The App finds only its own comments and pull requests: by marker or branch, and by author.

Against the stand-in, in-process: a person's comment that carries a marker, or a person's
pull request from the App's branch, is never taken for the App's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from app_harness import APP_ID
from fakehub_support import app_hub

from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp, Identity
from bot.github.forge import find_comment, find_pull
from bot.github.tracking import marker

OWNER, REPO = "octo", "widgets"
BOT = "teaparty-demo[bot]"
ACTIONS = Identity("github-actions[bot]", 15368)  # runner mode's GITHUB_TOKEN


@pytest.fixture
def hub(tmp_path: Path, pem: str) -> FakeGitHub:
    return app_hub(tmp_path / "hub", pem, alice="maintain", mallory="read")


async def test_the_apps_identity_is_its_bot_user_and_app_id(github: GitHubApp) -> None:
    assert await github.identity() == Identity(BOT, APP_ID)
    assert await github.login() == BOT


async def test_a_planted_marker_is_not_the_apps_comment(hub: FakeGitHub, github: GitHubApp) -> None:
    gh, me = await github.installation(1), await github.identity()
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    await hub.comment_as(OWNER, REPO, number, "mallory", f"{marker('job:1')}\nI am the App")
    assert await find_comment(gh, me, OWNER, REPO, number, "job:1") is None

    mine = await gh.comment(OWNER, REPO, number, f"{marker('job:1')}\nTracking", identity=me)
    await hub.comment_as(OWNER, REPO, number, "alice", f"> {marker('job:1')}\n> Tracking\n\nok")
    found = await find_comment(gh, me, OWNER, REPO, number, "job:1")
    assert found is not None
    assert (found["id"], found["user"]["login"]) == (mine["id"], BOT)
    assert found["performed_via_github_app"]["id"] == APP_ID
    assert await find_comment(gh, me, OWNER, REPO, number, "job:2") is None


async def test_a_recorded_comment_is_the_apps_whatever_token_it_now_uses(
    hub: FakeGitHub, github: GitHubApp
) -> None:
    gh = await github.installation(1)
    number = hub.open_issue(OWNER, REPO, title="t", body="b", author="alice")
    me = await github.identity()
    mine = await gh.comment(OWNER, REPO, number, f"{marker('gate:4')}\nQuestion", identity=me)
    assert await find_comment(gh, ACTIONS, OWNER, REPO, number, "gate:4") is None
    recorded = frozenset({str(mine["id"])})
    found = await find_comment(gh, ACTIONS, OWNER, REPO, number, "gate:4", recorded=recorded)
    assert found is not None
    assert found["id"] == mine["id"]


async def test_a_pull_request_from_the_apps_branch_is_the_apps_only_if_it_opened_it(
    hub: FakeGitHub, github: GitHubApp, tmp_path: Path
) -> None:
    gh, me = await github.installation(1), await github.identity()
    for branch in ("teaparty/job-1-x", "teaparty/job-2-y"):
        push(hub, tmp_path / branch.replace("/", "-"), branch)
    await hub.open_pull_as(
        OWNER, REPO, author="alice", head="teaparty/job-1-x", base="main", title="mine now"
    )
    assert len(await gh.open_pulls(OWNER, REPO, head=f"{OWNER}:teaparty/job-1-x")) == 1
    assert await find_pull(gh, me, OWNER, REPO, "teaparty/job-1-x") is None

    opened = await gh.create_pull(
        OWNER, REPO, title="App", head="teaparty/job-2-y", base="main", body="", identity=me
    )
    found = await find_pull(gh, me, OWNER, REPO, "teaparty/job-2-y")
    assert found is not None
    assert found["number"] == opened["number"]
    assert hub.violations == []


def comment(login: str, via: Any) -> dict[str, Any]:
    return {"id": 1, "user": {"login": login}, "performed_via_github_app": via}


@pytest.mark.parametrize(
    ("identity", "item", "wrote"),
    [
        (Identity(BOT, APP_ID), comment(BOT, {"id": APP_ID}), True),
        (Identity(BOT, APP_ID), comment("Teaparty-Demo[BOT]", {"id": APP_ID}), True),
        (Identity(BOT, APP_ID), comment("mallory", {"id": APP_ID}), False),
        (Identity(BOT, APP_ID), comment(BOT, None), False),
        (Identity(BOT, APP_ID), comment(BOT, {"id": APP_ID + 1}), False),
        (Identity(BOT, 1), comment(BOT, {"id": True}), False),
        (Identity(BOT, APP_ID), {"id": 1, "user": {"login": BOT}}, False),
        (Identity(BOT, APP_ID), {"id": 1, "user": None}, False),
        (ACTIONS, comment("github-actions[bot]", {"id": 15368}), True),
        (Identity("alice", None), comment("alice", None), True),  # a person's token
        (Identity("alice", None), comment("mallory", None), False),
    ],
)
def test_who_wrote_a_comment(identity: Identity, item: dict[str, Any], wrote: bool) -> None:
    assert identity.wrote(item) is wrote


def push(hub: FakeGitHub, work: Path, branch: str) -> None:
    """Commit one file on `branch` in a clone of the stand-in's remote and push it."""
    person = {"NAME": "Alice", "EMAIL": "alice@example.com"}
    env = os.environ | {f"GIT_AUTHOR_{k}": v for k, v in person.items()}
    env |= {f"GIT_COMMITTER_{k}": v for k, v in person.items()}

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=work, env=env, check=True, capture_output=True)

    work.mkdir(parents=True)
    git("clone", "-q", f"{hub.server_url}/{OWNER}/{REPO}.git", ".")
    git("checkout", "-q", "-b", branch)
    (work / "change.txt").write_text(branch)
    git("add", "change.txt")
    git("commit", "-q", "-m", f"work on {branch}")
    git("push", "-q", "origin", branch)
