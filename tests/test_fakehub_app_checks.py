"""The stand-in's check runs made by the App itself (`checks/create`, `checks/update`,
`checks/get`): checked against GitHub's description both ways, GitHub's output limit (65,535
characters) and commit check, and the installation's `checks: write`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from app_harness import declined
from fakehub_support import APP_ID, INSTALLATION, NAME, OWNER, make_jwt

from bot.fakehub.hub import FakeGitHub
from bot.fakehub.state import DEFAULT_APP_PERMISSIONS

RUNS = f"repos/{OWNER}/{NAME}/check-runs"


async def _client(
    tmp_path: Path, pem: str, permissions: dict[str, str]
) -> AsyncIterator[tuple[FakeGitHub, httpx.AsyncClient, str]]:
    hub = FakeGitHub(
        tmp_path / "remotes", app_id=APP_ID, private_key_pem=pem, permissions=permissions
    )
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    sha = (tmp_path / "remotes" / OWNER / f"{NAME}.git" / "refs" / "heads" / "main").read_text()
    transport = httpx.ASGITransport(app=hub.asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://hub/") as api:
        minted = await api.post(
            f"app/installations/{INSTALLATION}/access_tokens",
            headers={"Authorization": f"Bearer {make_jwt(pem)}"},
        )
        api.headers["Authorization"] = f"token {minted.json()['token']}"
        yield hub, api, sha.strip()


@pytest.fixture
async def world(
    tmp_path: Path, pem: str
) -> AsyncIterator[tuple[FakeGitHub, httpx.AsyncClient, str]]:
    async for made in _client(tmp_path, pem, dict(DEFAULT_APP_PERMISSIONS)):
        yield made


async def test_the_app_makes_moves_and_reads_its_check_run(
    world: tuple[FakeGitHub, httpx.AsyncClient, str],
) -> None:
    hub, api, sha = world
    made = await api.post(
        RUNS,
        json={
            "name": "TeaParty",
            "head_sha": sha,
            "external_id": "teaparty:job:1:round:0:0",
            "output": {"title": "Job 1", "summary": "planning"},
        },
    )
    assert made.status_code == 201
    run = made.json()
    assert (run["status"], run["conclusion"], run["app"]["id"]) == ("queued", None, APP_ID)
    moved = await api.patch(f"{RUNS}/{run['id']}", json={"status": "in_progress"})
    assert moved.json()["status"] == "in_progress"
    done = await api.patch(
        f"{RUNS}/{run['id']}",
        json={"conclusion": "success", "output": {"title": "Job 1: done", "summary": "done"}},
    )
    assert (done.json()["status"], done.json()["conclusion"]) == ("completed", "success")
    got = (await api.get(f"{RUNS}/{run['id']}")).json()
    assert (got["output"]["title"], got["output"]["summary"]) == ("Job 1: done", "done")
    assert got["external_id"] == "teaparty:job:1:round:0:0"
    listed = await api.get(
        f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs",
        params={"check_name": "TeaParty", "app_id": APP_ID, "filter": "all"},
    )
    assert [r["id"] for r in listed.json()["check_runs"]] == [run["id"]]
    other = await api.get(
        f"repos/{OWNER}/{NAME}/commits/{sha}/check-runs", params={"app_id": APP_ID + 1}
    )
    assert other.json()["check_runs"] == []
    assert hub.violations == []


async def test_github_refuses_what_it_would_refuse(
    world: tuple[FakeGitHub, httpx.AsyncClient, str],
) -> None:
    hub, api, sha = world
    long = {"title": "t", "summary": "x" * 65_536}
    refused = await api.post(RUNS, json={"name": "TeaParty", "head_sha": sha, "output": long})
    assert refused.status_code == 422
    assert "65536 characters, at most 65535 allowed" in refused.json()["message"]
    unknown = await api.post(RUNS, json={"name": "TeaParty", "head_sha": "f" * 40})
    assert (unknown.status_code, unknown.json()["message"]) == (
        422,
        f"No commit found for SHA: {'f' * 40}",
    )
    bare = await api.post(RUNS, json={"name": "TeaParty", "head_sha": sha, "status": "completed"})
    assert bare.status_code == 422
    assert (await api.get(f"{RUNS}/999999")).status_code == 404
    assert hub.app_check_runs(OWNER, NAME, check="TeaParty") == []
    assert [v.split(":")[0] for v in hub.violations] == ["checks/create request"]


async def test_an_installation_without_checks_write_is_refused(tmp_path: Path, pem: str) -> None:
    async for hub, api, sha in _client(tmp_path, pem, declined("checks")):
        refused = await api.post(RUNS, json={"name": "TeaParty", "head_sha": sha})
        assert refused.status_code == 403
        assert refused.json()["message"] == "Resource not accessible by integration"
        assert hub.violations == []
