"""The early draft's calls on GitHub, against the stand-in in-process: the draft opens once
(a 502 after GitHub made it, or a crash before it was recorded, finds it), it is marked ready
once (a 502 after the mutation took effect is looked into before it is sent again), and the
`pull_request` webhooks the App's own acts cause start nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakehub_support import app_hub, push_branch
from fakes import FakeForgeObjects

from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp
from bot.github.forge import GitHubForge
from bot.github.subject import Subject
from bot.github.tracking import EARLY_DRAFT
from bot.handlers.payload_fields import Ignored
from bot.handlers.payloads import parse_command
from orchestrator.core.gate_kinds import GateKinds
from orchestrator.core.messages import Usage
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.ports import DraftForge, JobStatus
from orchestrator.workspace.spaces import JobSpace

OWNER, REPO = "octo", "widgets"
BRANCH = "teaparty/job-1-add-it"
BOT = "teaparty-demo[bot]"


@pytest.fixture
def hub(tmp_path: Path, pem: str) -> FakeGitHub:
    return app_hub(tmp_path / "hub", pem, alice="maintain")


async def _forge(hub: FakeGitHub, github: GitHubApp, tmp_path: Path) -> GitHubForge:
    number = hub.open_issue(OWNER, REPO, title="Add it", body="Please.", author="alice")
    push_branch(hub, tmp_path / "work", BRANCH, {"docs/it.md": "it\n"})
    subject = Subject(OWNER, REPO, number, 1, "main", "Add it", "alice", "alice", "teaparty")
    return GitHubForge(
        github,
        FakeForgeObjects(),
        subject,
        kinds=GateKinds(),
        server_url="http://hub",
        identity=await github.identity(),
    )


STATUS = JobStatus(1, "Add it", "working", "working", (), Usage(), 0.0, BRANCH)
SPACE = JobSpace(1, Path("repo"), Path("mirror"), BRANCH, "0" * 40, Path("worktree"))
JOB = JobHandle(1, "job:1", SPACE, created=False)


def _operations(hub: FakeGitHub, name: str) -> int:
    return sum(r.operation_id == f"graphql/{name}" for r in hub.requests)


async def test_the_draft_opens_once_through_a_502_and_a_lost_record(
    hub: FakeGitHub, github: GitHubApp, tmp_path: Path
) -> None:
    forge = await _forge(hub, github, tmp_path)
    assert isinstance(forge, DraftForge)
    hub.fail_next("POST", r"/pulls$", 502, apply=True)  # made, but GitHub answered 502
    first = await forge.open_draft(STATUS, JOB)
    assert isinstance(forge.objects, FakeForgeObjects)
    forge.objects.objects.clear()  # a crash before the engine recorded it
    again = await forge.open_draft(STATUS, JOB)
    (pull,) = hub.pulls(OWNER, REPO)
    assert pull.pull is not None
    assert pull.pull.draft
    assert first == again
    assert first.number == pull.number
    assert EARLY_DRAFT in (pull.body or "")
    assert hub.violations == []


async def test_marked_ready_once_through_a_502_and_its_webhook_starts_nothing(
    hub: FakeGitHub, github: GitHubApp, tmp_path: Path
) -> None:
    forge = await _forge(hub, github, tmp_path)
    made = await forge.open_draft(STATUS, JOB)
    assert made.number is not None
    sent = len(hub.deliveries)
    hub.fail_next("POST", r"/graphql$", 502, apply=True)  # it took effect; GitHub said 502
    await forge.mark_ready(STATUS, made.number)
    (pull,) = hub.pulls(OWNER, REPO)
    assert pull.pull is not None
    assert not pull.pull.draft
    assert _operations(hub, "MarkReady") == 1, "looked for before it was sent again"
    await forge.mark_ready(STATUS, made.number)  # ready already: nothing is sent
    assert _operations(hub, "MarkReady") == 1
    (ready,) = [d for d in hub.deliveries[sent:] if d.event == "pull_request"]
    assert (ready.payload["action"], ready.payload["sender"]["login"]) == ("ready_for_review", BOT)
    read = parse_command("pull_request", ready.payload, app_login=BOT)
    assert isinstance(read, Ignored), "the App's own act is not a person's"
    assert hub.violations == []


@pytest.mark.parametrize("action", ["opened", "synchronize", "ready_for_review"])
def test_the_apps_own_pull_request_events_are_ignored(action: str) -> None:
    payload = {
        "action": action,
        "sender": {"login": BOT, "type": "Bot", "id": 1},
        "repository": {"name": REPO, "owner": {"login": OWNER}, "full_name": f"{OWNER}/{REPO}"},
        "pull_request": {"number": 2, "draft": False, "merged": False, "head": {"ref": BRANCH}},
    }
    assert isinstance(parse_command("pull_request", payload, app_login=BOT), Ignored)
