"""The stand-in's CI: check suites and runs with output and annotations, Actions jobs' logs
behind a redirect to another host, re-runs, and the webhooks a completed suite sends, each
checked against GitHub's description (and octokit's webhook schema)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fakehub_support import APP_ID, INSTALLATION, NAME, OWNER, SECRET, make_jwt
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from webhook_schemas import webhook_errors

from bot.fakehub.ci_state import Annotation, Check
from bot.fakehub.hub import FakeGitHub
from bot.fakehub.serve import serve_local

CI_PERMISSIONS = {
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
    "checks": "write",
    "actions": "write",
}
LOG = "Run pytest\nFAILED tests/test_x.py::test_adds - assert 3 == 4\n1 failed, 9 passed\n"
FAILING = Check(
    "tests",
    "failure",
    log=LOG,
    annotations=(Annotation("tests/test_x.py", 12, "assert 3 == 4"),),
)


@dataclass
class World:
    hub: FakeGitHub
    api: httpx.AsyncClient
    got: asyncio.Queue[tuple[str, dict[str, object]]]
    sha: str

    async def delivery(self) -> tuple[str, dict[str, object]]:
        return await asyncio.wait_for(self.got.get(), timeout=10)


async def _world(tmp_path: Path, pem: str, permissions: dict[str, str]) -> AsyncIterator[World]:
    got: asyncio.Queue[tuple[str, dict[str, object]]] = asyncio.Queue()

    async def hook(request: Request) -> Response:
        await got.put((request.headers["x-github-event"], json.loads(await request.body())))
        return Response(status_code=202)

    receiver = Starlette(routes=[Route("/webhook", hook, methods=["POST"])])
    async with serve_local(receiver) as hook_url:
        hub = FakeGitHub(
            tmp_path / "remotes",
            app_id=APP_ID,
            private_key_pem=pem,
            permissions=permissions,
            webhook_url=f"{hook_url}webhook",
            webhook_secret=SECRET,
        )
        hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
        sha = (tmp_path / "remotes" / OWNER / f"{NAME}.git" / "refs" / "heads" / "main").read_text()
        async with hub.serve() as url, httpx.AsyncClient(base_url=url) as client:
            minted = await client.post(
                f"app/installations/{INSTALLATION}/access_tokens",
                headers={"Authorization": f"Bearer {make_jwt(pem)}"},
            )
            client.headers["Authorization"] = f"token {minted.json()['token']}"
            yield World(hub, client, got, sha.strip())
        assert hub.violations == [], hub.violations


@pytest.fixture
async def world(tmp_path: Path, pem: str) -> AsyncIterator[World]:
    async for made in _world(tmp_path, pem, CI_PERMISSIONS):
        yield made


async def test_a_failed_workflow_run_is_read_as_github_serves_it(world: World) -> None:
    hub, api, sha = world.hub, world.api, world.sha
    passing = Check("lint", "success", log="ok\n")
    suite_id = await hub.run_checks(OWNER, NAME, sha, [passing, FAILING])

    event, payload = await world.delivery()
    assert event == "check_suite"
    assert payload["check_suite"]["conclusion"] == "failure"  # type: ignore[index]
    assert payload["check_suite"]["id"] == suite_id  # type: ignore[index]
    assert webhook_errors("check_suite", payload) == []
    event, payload = await world.delivery()
    assert event == "workflow_run"
    assert payload["workflow_run"]["head_sha"] == sha  # type: ignore[index]
    assert webhook_errors("workflow_run", payload) == []

    suites = (await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-suites")).json()
    assert [(s["status"], s["conclusion"]) for s in suites["check_suites"]] == [
        ("completed", "failure")
    ]
    runs = (await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs")).json()["check_runs"]
    assert [(r["name"], r["conclusion"]) for r in runs] == [
        ("lint", "success"),
        ("tests", "failure"),
    ]
    failing = runs[1]
    notes = (await api.get(f"repos/{OWNER}/{NAME}/check-runs/{failing['id']}/annotations")).json()
    assert [(n["path"], n["start_line"], n["message"]) for n in notes] == [
        ("tests/test_x.py", 12, "assert 3 == 4")
    ]

    logs = await api.get(f"repos/{OWNER}/{NAME}/actions/jobs/{failing['id']}/logs")
    assert logs.status_code == 302
    download = logs.headers["location"]
    assert httpx.URL(download).host != httpx.URL(str(api.base_url)).host  # another host
    followed = await api.get(
        f"repos/{OWNER}/{NAME}/actions/jobs/{failing['id']}/logs", follow_redirects=True
    )
    assert followed.text == LOG
    assert hub.log_reads() == [(failing["id"], False)]  # httpx left the token behind


async def test_a_rerun_job_concludes_as_planned_and_completes_its_suite_again(world: World) -> None:
    hub, api, sha = world.hub, world.api, world.sha
    await hub.run_checks(OWNER, NAME, sha, [FAILING])
    await world.delivery(), await world.delivery()
    (run,) = (await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs")).json()["check_runs"]

    hub.plan_rerun(OWNER, NAME, Check("tests", "success", log="1 passed\n"))
    rerun = await api.post(f"repos/{OWNER}/{NAME}/actions/jobs/{run['id']}/rerun")
    assert rerun.status_code == 201
    event, payload = await world.delivery()
    assert event == "check_suite"
    assert payload["check_suite"]["conclusion"] == "success"  # type: ignore[index]
    latest = (await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs")).json()["check_runs"]
    assert [(r["name"], r["conclusion"]) for r in latest] == [("tests", "success")]
    every = await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs?filter=all")
    assert len(every.json()["check_runs"]) == 2
    assert hub.ci_reruns() == [("actions/re-run-job-for-workflow-run", run["id"])]

    # Another app's check run is rerequested through the Checks API, not Actions.
    other = await hub.run_checks(
        OWNER, NAME, sha, [FAILING], app="circleci-checks", app_name="CircleCI"
    )
    await world.delivery()
    runs = (await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs?filter=all")).json()
    theirs = next(r for r in runs["check_runs"] if r["check_suite"]["id"] == other)
    wrong = await api.post(f"repos/{OWNER}/{NAME}/actions/jobs/{theirs['id']}/rerun")
    assert wrong.status_code == 404
    again = await api.post(f"repos/{OWNER}/{NAME}/check-runs/{theirs['id']}/rerequest")
    assert again.status_code == 201
    event, payload = await world.delivery()
    assert payload["check_suite"]["conclusion"] == "failure"  # type: ignore[index]  # unplanned: the same


async def test_a_suite_still_running_and_one_awaiting_approval(world: World) -> None:
    hub, api, sha = world.hub, world.api, world.sha
    running = await hub.start_checks(OWNER, NAME, sha)
    suites = (await api.get(f"repos/{OWNER}/{NAME}/commits/{sha}/check-suites")).json()
    assert [(s["status"], s["conclusion"]) for s in suites["check_suites"]] == [("queued", None)]
    await hub.finish_checks(OWNER, NAME, running, [Check("tests", "success")])
    await world.delivery(), await world.delivery()
    await hub.await_approval(OWNER, NAME, sha)
    event, payload = await world.delivery()
    assert payload["check_suite"]["conclusion"] == "action_required"  # type: ignore[index]
    assert webhook_errors("check_suite", payload) == []


async def test_without_the_actions_and_checks_permissions_ci_is_refused(
    tmp_path: Path, pem: str
) -> None:
    readable = CI_PERMISSIONS | {"actions": "read", "checks": "read"}
    async for world in _world(tmp_path, pem, readable):
        await world.hub.run_checks(OWNER, NAME, world.sha, [FAILING])
        runs = await world.api.get(f"repos/{OWNER}/{NAME}/commits/{world.sha}/check-runs")
        job = runs.json()["check_runs"][0]["id"]
        refused = await world.api.post(f"repos/{OWNER}/{NAME}/actions/jobs/{job}/rerun")
        assert refused.status_code == 403
    without = {k: v for k, v in CI_PERMISSIONS.items() if k not in ("actions", "checks")}
    async for world in _world(tmp_path / "2", pem, without):
        await world.hub.run_checks(OWNER, NAME, world.sha, [FAILING])
        listed = await world.api.get(f"repos/{OWNER}/{NAME}/commits/{world.sha}/check-runs")
        assert listed.status_code == 403
        logs = await world.api.get(f"repos/{OWNER}/{NAME}/actions/jobs/1/logs")
        assert logs.status_code == 403
