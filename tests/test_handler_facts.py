"""bot.handlers in process against the GitHub stand-in: a handler asks GitHub only for the facts
its decision can use, keeps each answer a minute, and a ping or an ignored event asks nothing;
a job an older version stored without its project file gets it again from its repository."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from app_harness import OWNER, REPO, unserved

from bot.fakehub.hub import FakeGitHub
from bot.handlers.repos import RepoConfig, with_decider
from bot.server.runtime import Runtime
from orchestrator.api import ConfigError, Delivery, JobSource


@dataclass
class World:
    hub: FakeGitHub
    runtime: Runtime

    async def handle(self, event: str, body: bytes) -> tuple[str, int | None]:
        """Hand one delivery to the service, as the worker would."""
        action = json.loads(body).get("action", "")
        return await self.runtime.service.handle(Delivery("d-1", event, action, body, 0))

    def asked(self) -> list[str]:
        """What the App asked GitHub about the repository, as `METHOD path`."""
        mine = f"/repos/{OWNER}/{REPO}/"
        return [f"{r.method} {r.path}" for r in self.hub.requests if r.path.startswith(mine)]


def _alice(hub: FakeGitHub) -> None:
    hub.add_user("alice", "admin")


@pytest.fixture
async def world(tmp_path: Path) -> AsyncIterator[World]:
    async with unserved(tmp_path, prepare=_alice) as (hub, runtime, _, _):
        yield World(hub, runtime)


async def test_a_ping_and_an_ignored_event_ask_github_nothing(world: World) -> None:
    # (workflow_run is read now: runner mode follows CI with it; test_ci_decisions.py)
    assert await world.handle("ping", b'{"zen": "Keep it logically awesome."}') == ("pong", None)
    outcome, job_id = await world.handle("deployment", b'{"action": "created"}')
    assert outcome.startswith("ignored: deployment is ignored")
    assert job_id is None
    assert world.asked() == []


async def test_a_label_that_is_not_the_trigger_reads_the_config_only(world: World) -> None:
    number = world.hub.open_issue(OWNER, REPO, title="Typo", body="fix", author="alice")
    await world.hub.label_issue(OWNER, REPO, number, "bug", sender="alice")
    outcome = await world.handle("issues", world.hub.deliveries[-1].body)
    assert outcome == ("ignored: label 'bug' is not the trigger 'teaparty'", None)
    assert world.asked() == [f"GET /repos/{OWNER}/{REPO}/contents/.teaparty/project.yaml"]


async def test_a_label_on_a_pull_request_asks_github_nothing(world: World) -> None:
    number = world.hub.open_issue(OWNER, REPO, title="Typo", body="fix", author="alice")
    await world.hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
    payload = json.loads(world.hub.deliveries[-1].body)
    payload["issue"]["pull_request"] = {"url": "https://example.test/pulls/1"}
    outcome = await world.handle("issues", json.dumps(payload).encode())
    assert outcome == ("ignored: labels on pull requests start nothing", None)
    assert world.asked() == []


async def test_config_and_permission_are_asked_once_a_minute(world: World) -> None:
    number = world.hub.open_issue(OWNER, REPO, title="Do it", body="please", author="mallory")
    for _ in range(2):
        await world.hub.label_issue(OWNER, REPO, number, "teaparty", sender="mallory")
        outcome = await world.handle("issues", world.hub.deliveries[-1].body)
        assert outcome == ("refused: mallory has no write access", None)
    reads = [a for a in world.asked() if a.startswith("GET") and "/comments" not in a]
    assert reads == [
        f"GET /repos/{OWNER}/{REPO}/contents/.teaparty/project.yaml",
        f"GET /repos/{OWNER}/{REPO}/collaborators/mallory/permission",
    ]
    assert len(world.hub.comments(OWNER, REPO, number)) == 1  # the refusal, once


async def test_a_comment_on_an_issue_without_a_job_asks_github_nothing(world: World) -> None:
    number = world.hub.open_issue(OWNER, REPO, title="Typo", body="fix", author="alice")
    await world.hub.comment_as(OWNER, REPO, number, "alice", "yes")
    outcome = await world.handle("issue_comment", world.hub.deliveries[-1].body)
    assert outcome == ("ignored: no job on this issue", None)
    assert world.asked() == []


async def test_a_job_stored_without_its_project_file_gets_it_from_its_repository(
    world: World,
) -> None:
    office, service = world.runtime.office, world.runtime.service
    project = with_decider(
        RepoConfig(None, None), "bob", owner=OWNER, repo=REPO, org=office.org
    ).project
    assert project is not None
    office.add_project(project)
    source = JobSource("github/x", "https://example.test/x.git", "main", lambda _: "b", "b")
    job = await office.start_job(
        project=project.name, key="github:octo/widgets#1", title="t", brief="b", source=source
    )
    with pytest.raises(ConfigError, match="no project stored"):
        await service.restore_project(job.job_id)  # not the App's job

    older = {  # what an older version linked: no project text, no learnings
        "owner": OWNER,
        "repo": REPO,
        "number": 1,
        "installation_id": world.hub.state.repo(OWNER, REPO).installation_id,
        "default_branch": "main",
        "title": "t",
        "requester": "alice",
        "decider": "bob",
        "trigger_label": "teaparty",
    }
    await office.records.link(job.job_id, "github", json.dumps(older))
    await service.restore_project(job.job_id)
    stored = await office.engine.store.read(
        lambda tx: tx.execute(
            "SELECT project_text FROM jobs WHERE job_id = ?", (job.job_id,)
        ).fetchone()
    )
    assert stored == ('humans: {decider: "bob"}\n',)  # no project file there: the defaults
    assert f"GET /repos/{OWNER}/{REPO}/contents/.teaparty/project.yaml" in world.asked()
