"""The stand-in's OAuth web flow and the user-token calls the job page makes, as GitHub documents
them, their replies checked against the OpenAPI description."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from fakehub_support import APP_ID, NAME, OWNER

from bot.fakehub.hub import FakeGitHub

CALLBACK = "https://teaparty.example/auth/callback"
SECRET = "the-client-secret"


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def oauth_hub(tmp_path: Path, pem: str, clock: Clock) -> FakeGitHub:
    hub = FakeGitHub(
        tmp_path / "remotes", app_id=APP_ID, private_key_pem=pem, client_secret=SECRET, clock=clock
    )
    hub.add_repo(OWNER, NAME)
    hub.add_repo(OWNER, "secret", private=True)
    hub.add_user("alice", "write")
    hub.add_user("tess", "triage")
    hub.oauth.callback_urls.append(CALLBACK)
    return hub


@pytest.fixture
async def web(oauth_hub: FakeGitHub) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=oauth_hub.asgi)
    async with httpx.AsyncClient(transport=transport, base_url="http://hub") as client:
        yield client
    assert oauth_hub.violations == []


async def authorize(web: httpx.AsyncClient, hub: FakeGitHub, **extra: str) -> httpx.Response:
    query = {"client_id": hub.state.client_id, "redirect_uri": CALLBACK, "state": "s1"} | extra
    return await web.get("/login/oauth/authorize", params=query)


async def code_for(web: httpx.AsyncClient, hub: FakeGitHub, login: str) -> str:
    hub.oauth.signed_in = login
    sent = await authorize(web, hub)
    assert sent.status_code == 302
    back = urlsplit(sent.headers["location"])
    assert f"{back.scheme}://{back.netloc}{back.path}" == CALLBACK
    query = parse_qs(back.query)
    assert query["state"] == ["s1"]
    return query["code"][0]


async def exchange(
    web: httpx.AsyncClient, hub: FakeGitHub, code: str, **extra: str
) -> dict[str, Any]:
    form = {"client_id": hub.state.client_id, "client_secret": SECRET, "code": code} | extra
    sent = await web.post(
        "/login/oauth/access_token", data=form, headers={"Accept": "application/json"}
    )
    assert sent.status_code == 200  # GitHub answers its errors with 200 too
    answer: dict[str, Any] = sent.json()
    return answer


async def user_token(web: httpx.AsyncClient, hub: FakeGitHub, login: str) -> str:
    answer = await exchange(web, hub, await code_for(web, hub, login))
    token: str = answer["access_token"]
    return token


async def test_a_code_becomes_a_user_token_once(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub
) -> None:
    code = await code_for(web, oauth_hub, "alice")
    answer = await exchange(web, oauth_hub, code, redirect_uri=CALLBACK)
    assert answer["access_token"].startswith("ghu_")
    assert answer["token_type"] == "bearer"
    assert answer["expires_in"] == 28800
    assert answer["refresh_token"].startswith("ghr_")
    again = await exchange(web, oauth_hub, code)
    assert again["error"] == "bad_verification_code"
    assert "incorrect or expired" in again["error_description"]


async def test_without_json_the_answer_is_a_form(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub
) -> None:
    code = await code_for(web, oauth_hub, "alice")
    form = {"client_id": oauth_hub.state.client_id, "client_secret": SECRET, "code": code}
    sent = await web.post("/login/oauth/access_token", data=form)
    assert sent.headers["content-type"].startswith("application/x-www-form-urlencoded")
    assert parse_qs(sent.text)["access_token"][0].startswith("ghu_")


async def test_json_bodies_are_taken_too(web: httpx.AsyncClient, oauth_hub: FakeGitHub) -> None:
    code = await code_for(web, oauth_hub, "alice")
    body = {"client_id": oauth_hub.state.client_id, "client_secret": SECRET, "code": code}
    sent = await web.post(
        "/login/oauth/access_token", json=body, headers={"Accept": "application/json"}
    )
    assert sent.json()["access_token"].startswith("ghu_")


async def test_errors_as_github_names_them(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub, clock: Clock
) -> None:
    code = await code_for(web, oauth_hub, "alice")
    wrong = await exchange(web, oauth_hub, code, client_secret="guess")
    assert wrong["error"] == "incorrect_client_credentials"
    moved = await exchange(web, oauth_hub, code, redirect_uri="https://elsewhere.example/cb")
    assert moved["error"] == "redirect_uri_mismatch"
    late = await code_for(web, oauth_hub, "alice")
    clock.now += 601  # a code lives ten minutes
    assert (await exchange(web, oauth_hub, late))["error"] == "bad_verification_code"


async def test_authorize_refuses_what_github_refuses(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub
) -> None:
    assert (await authorize(web, oauth_hub)).status_code == 401  # nobody signed in
    oauth_hub.oauth.signed_in = "alice"
    assert (await authorize(web, oauth_hub, client_id="Iv1.nope")).status_code == 404
    sent = await authorize(web, oauth_hub, redirect_uri="https://evil.example/cb")
    back = urlsplit(sent.headers["location"])
    assert back.netloc == "teaparty.example"  # never to the unregistered address
    assert parse_qs(back.query)["error"] == ["redirect_uri_mismatch"]
    oauth_hub.oauth.callback_urls.clear()
    assert (await authorize(web, oauth_hub)).status_code == 400


async def test_user_token_reads_who_and_the_repository_permissions(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub
) -> None:
    token = await user_token(web, oauth_hub, "tess")
    auth = {"Authorization": f"Bearer {token}"}
    me = await web.get("/user", headers=auth)
    assert me.status_code == 200
    assert me.json()["login"] == "tess"
    repo = await web.get(f"/repos/{OWNER}/{NAME}", headers=auth)
    assert repo.json()["permissions"] == {
        "pull": True,
        "triage": True,
        "push": False,
        "maintain": False,
        "admin": False,
    }


async def test_a_stranger_sees_public_repositories_only(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub
) -> None:
    token = await user_token(web, oauth_hub, "stranger")
    auth = {"Authorization": f"Bearer {token}"}
    public = await web.get(f"/repos/{OWNER}/{NAME}", headers=auth)
    assert public.json()["permissions"]["pull"] is True
    assert public.json()["permissions"]["push"] is False
    assert (await web.get(f"/repos/{OWNER}/secret", headers=auth)).status_code == 404


async def test_user_tokens_expire_and_reach_only_what_the_page_asks(
    web: httpx.AsyncClient, oauth_hub: FakeGitHub, clock: Clock
) -> None:
    token = await user_token(web, oauth_hub, "alice")
    auth = {"Authorization": f"Bearer {token}"}
    issue = await web.get(f"/repos/{OWNER}/{NAME}/issues/1", headers=auth)
    assert issue.status_code == 403
    clock.now += 8 * 3600
    assert (await web.get("/user", headers=auth)).status_code == 401


async def test_an_installation_has_no_user(web: httpx.AsyncClient, oauth_hub: FakeGitHub) -> None:
    minted = oauth_hub.state.issue_token(1, permissions={"metadata": "read"})
    auth = {"Authorization": f"Bearer {minted.token}"}
    assert (await web.get("/user", headers=auth)).status_code == 403
