"""issues.edited: a real payload becomes `IssueEdited`; the App's own edits and a bot's are
dropped; an edit of an issue without a running job is ignored, and one of a running job's
issue is put to its decider as an intent gate whose comment shows the diff."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from app_harness import OWNER, REPO, bodies, unserved, until
from conftest import Load
from fakehub_support import _app_client
from fakes import unanswered_gate
from test_bot_events import SPELLING

from bot.fakehub.hub import FakeGitHub
from bot.github.outbound import Outbound
from bot.github.tracking import EDIT_GATE_TITLE, gate_body
from bot.handlers.actions import Ignore, ReviseIssue
from bot.handlers.deliveries import IssueEdited
from bot.handlers.issues import decide_edit
from bot.handlers.payloads import Actor, Ignored, Repo, parse_command
from bot.server.runtime import Runtime
from orchestrator.api import Delivery, JobRecord

APP = "teaparty[bot]"


def edited(payload: Load, **changes: Any) -> IssueEdited:
    data = payload("issues.edited")
    data["changes"] = changes
    command = parse_command("issues", data, app_login=APP)
    assert isinstance(command, IssueEdited)
    return command


def test_issues_edited_becomes_issue_edited(payload: Load) -> None:
    data = payload("issues.edited")
    assert data["changes"] == {}  # the octokit example says nothing of what changed
    command = parse_command("issues", data, app_login=APP)
    written = datetime.fromisoformat(data["issue"]["updated_at"].replace("Z", "+00:00"))
    assert command == IssueEdited(
        Repo("Codertocat", "Hello-World", "master", installation_id=None, private=False),
        SPELLING,
        Actor("Codertocat", is_bot=False),
        edited_at=written.timestamp(),
    )


def test_what_an_edit_changed_is_read_sanitized(payload: Load) -> None:
    command = edited(
        payload, title={"from": "Speling"}, body={"from": "Before<!-- hidden -->\r\nthe edit"}
    )
    assert (command.before_title, command.before_body) == ("Speling", "Before\nthe edit")


@pytest.mark.parametrize(
    ("login", "kind", "why"),
    [(APP, "Bot", "the app's own account"), ("renovate[bot]", "Bot", "not in allowed_bots")],
)
def test_the_apps_own_edit_and_a_bots_are_ignored(
    payload: Load, login: str, kind: str, why: str
) -> None:
    data = payload("issues.edited")
    data["sender"] |= {"login": login, "type": kind}
    command = parse_command("issues", data, app_login=APP)
    assert isinstance(command, Ignored)
    assert command.reason.startswith("issues.edited is ignored: ")
    assert why in command.reason


def job(state: str) -> JobRecord:
    return JobRecord(7, "github:Codertocat/Hello-World#1", "hello-world", "Spelling", state)


def test_an_edit_is_put_to_the_decider_only_while_the_job_runs(payload: Load) -> None:
    command = edited(payload, title={"from": "Speling error"})
    assert decide_edit(command, None) == (Ignore("the issue has no job"),)
    assert decide_edit(command, job("complete")) == (Ignore("job 7 has ended (complete)", 7),)
    assert decide_edit(command, job("active")) == (
        ReviseIssue(
            7,
            SPELLING.title,
            SPELLING.body,
            by="Codertocat",
            edited_at=command.edited_at,
            before_title="Speling error",
        ),
    )
    data = payload("issues.edited")
    data["issue"]["pull_request"] = {"url": "https://api.github.com/pulls/1"}
    on_pull = parse_command("issues", data, app_login=APP)
    assert isinstance(on_pull, IssueEdited)
    assert decide_edit(on_pull, job("active")) == (
        Ignore("edits of pull requests are not acted on"),
    )


def test_an_edit_gate_shows_the_diff_in_a_diff_block() -> None:
    diff = (
        "--- the text the job works to\n+++ as edited by bob\n@@ -1,3 +1,3 @@\n"
        "-Title: Old\n+Title: New ``` @carol fixes #12"
    )
    gate = unanswered_gate(
        4,
        7,
        conversation_id="job:7",
        call_id="edit:2",
        kind="intent",
        question=f"The issue was edited.\n\n{diff}",
        options=("yes", "no"),
        asked_by="engine",
        content_hash="ab" * 32,
        payload={"revision": 2, "diff": diff},
    )
    body = gate_body(gate, decider="carol", agent=Outbound("octo", "widgets", 3))
    assert f"**Question 4** — {EDIT_GATE_TITLE} (`intent abababa`)" in body
    assert "> The issue was edited." in body
    assert "````diff\n--- the text the job works to\n" in body, "a fence no line can close"
    assert "+Title: New ``` @carol fixes (reference only) #12\n````" in body
    assert body.count("@carol") == 2  # in the diff's code and the App's own mention


@dataclass
class World:
    hub: FakeGitHub
    runtime: Runtime
    api_url: str
    pem: str

    async def handle(self, event: str, body: bytes) -> tuple[str, int | None]:
        """Hand one delivery to the service, as the worker would."""
        action = json.loads(body).get("action", "")
        return await self.runtime.service.handle(Delivery("d", event, action, body, 0))

    async def settled(self) -> None:
        await until(lambda: not self.runtime._syncing, what="the App's syncs to end")


def _alice(hub: FakeGitHub) -> None:
    hub.add_user("alice", "admin")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with unserved(tmp_path, prepare=_alice) as (hub, runtime, api_url, pem):
        yield World(hub, runtime, api_url, pem)
    assert hub.violations == []


async def test_an_edit_of_an_issue_without_a_job_is_ignored(world: World) -> None:
    hub = world.hub
    number = hub.open_issue(OWNER, REPO, title="Typo", body="fix", author="alice")
    await hub.edit_issue(OWNER, REPO, number, sender="alice", body="fix it")
    outcome = await world.handle("issues", hub.deliveries[-1].body)
    assert outcome == ("ignored: the issue has no job", None)


async def test_a_title_edit_of_a_running_jobs_issue_asks_the_decider(world: World) -> None:
    hub = world.hub
    number = hub.open_issue(OWNER, REPO, title="Typo", body="fix it", author="alice")
    await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
    outcome, job_id = await world.handle("issues", hub.deliveries[-1].body)
    assert outcome == f"job {job_id}"
    assert job_id is not None

    await hub.edit_issue(OWNER, REPO, number, sender="alice", title="Typo in the README")
    again = hub.deliveries[-1].body
    outcome, _ = await world.handle("issues", again)
    assert outcome.startswith("issue edited by alice: gate ")
    assert await world.handle("issues", again) == ("issue edited by alice: seen", job_id)
    await world.settled()
    (asked,) = bodies(hub, number, "gate:")
    assert EDIT_GATE_TITLE in asked
    assert "```diff\n" in asked
    assert "-Title: Typo\n+Title: Typo in the README\n" in asked
    assert "fix it" in asked  # the unchanged text, as context only
    assert "-fix it" not in asked
    assert "+fix it" not in asked

    revisions = await world.runtime.office.issue_edits.revisions(job_id)
    assert [(r.state, r.text.title) for r in revisions] == [
        ("original", "Typo"),
        ("asked", "Typo in the README"),
    ]


async def test_the_apps_own_edit_through_the_api_is_ignored(world: World) -> None:
    hub = world.hub
    number = hub.open_issue(OWNER, REPO, title="Typo", body="fix", author="alice")
    await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
    _, job_id = await world.handle("issues", hub.deliveries[-1].body)
    app = _app_client(world.api_url, world.pem)
    async with app.with_auth(app.auth.as_installation(1)) as gh:  # as the App's installation
        await gh.rest.issues.async_update(OWNER, REPO, number, body="fixed")
    delivered = hub.deliveries[-1]
    assert (delivered.event, delivered.action) == ("issues", "edited")
    outcome, _ = await world.handle("issues", delivered.body)
    assert outcome.startswith("ignored: issues.edited is ignored: ")
    assert "the app's own account" in outcome
    assert job_id is not None
    assert [r.state for r in await world.runtime.office.issue_edits.revisions(job_id)] == [
        "original"
    ]
