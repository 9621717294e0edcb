"""The stand-in authenticates like GitHub: App JWTs, installation tokens, their scopes."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
from cryptography.hazmat.primitives.asymmetric import rsa
from fakehub_support import (
    APP_ID,
    INSTALLATION,
    NAME,
    OWNER,
    _app_client,
    _pem,
    make_jwt,
    mint_token,
)

from bot.fakehub.hub import FakeGitHub

# -- auth -------------------------------------------------------------------------------


async def test_jwt_then_installation_token_through_githubkit(
    hub: FakeGitHub, base_url: str, pem: str
) -> None:
    app_gh = _app_client(base_url, pem)
    app = (await app_gh.rest.apps.async_get_authenticated()).parsed_data
    assert app is not None
    assert (app.slug, app.id) == ("teaparty-demo", APP_ID)
    installation = (await app_gh.rest.apps.async_get_repo_installation(OWNER, NAME)).parsed_data
    assert installation.id == INSTALLATION
    async with app_gh.with_auth(app_gh.auth.as_installation(installation.id)) as inst:
        for _ in range(3):
            repo = (await inst.rest.repos.async_get(OWNER, NAME)).parsed_data
            assert (repo.full_name, repo.default_branch) == ("octo/widgets", "main")
    assert [(r.operation_id, r.auth) for r in hub.requests] == [
        ("apps/get-authenticated", "jwt"),
        ("apps/get-repo-installation", "jwt"),
        ("apps/create-installation-access-token", "jwt"),
        ("repos/get", "token"),
        ("repos/get", "token"),
        ("repos/get", "token"),
    ]
    token = next(iter(hub.state.tokens.values()))
    assert token.token.startswith("ghs_")
    assert 3590 < token.expires_at - time.time() <= 3600
    assert hub.violations == []


async def test_requests_without_valid_credentials_get_401(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    other = _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    token = await mint_token(http, pem)
    cases = [
        ("repos/octo/widgets", {}),
        ("repos/octo/widgets", {"Authorization": "token ghs_not-issued-by-the-hub"}),
        ("repos/octo/widgets", {"Authorization": f"Bearer {make_jwt(pem)}"}),
        ("app", {}),
        ("app", {"Authorization": f"token {token}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(other)}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(pem, exp_in=1200)}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(pem, exp_in=-5)}"}),
        ("app", {"Authorization": f"Bearer {make_jwt(pem, iss=999)}"}),
    ]
    for path, headers in cases:
        response = await http.get(path, headers=headers)
        assert response.status_code == 401, (path, headers)
    assert (await http.get("repos/octo/widgets")).json()["message"] == "Bad credentials"
    by_client_id = make_jwt(pem, iss=hub.state.client_id)  # GitHub's recommended issuer
    assert (await http.get("app", headers={"Authorization": f"Bearer {by_client_id}"})).is_success
    assert [r.auth for r in hub.requests[-3:]] == ["jwt", "none", "jwt"]
    assert hub.violations == []


async def test_installation_tokens_expire_after_an_hour(tmp_path: Path, pem: str) -> None:
    now = [time.time()]
    hub = FakeGitHub(tmp_path, app_id=APP_ID, private_key_pem=pem, clock=lambda: now[0])
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    async with hub.serve() as url, httpx.AsyncClient(base_url=url) as http:
        auth = {"Authorization": f"token {await mint_token(http, pem)}"}
        assert (await http.get("repos/octo/widgets", headers=auth)).status_code == 200
        now[0] += 3601
        assert (await http.get("repos/octo/widgets", headers=auth)).status_code == 401


async def test_tokens_see_only_their_installation_and_permissions(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    hub.add_repo(OWNER, "elsewhere", installation_id=INSTALLATION + 1)
    jwt_auth = {"Authorization": f"Bearer {make_jwt(pem)}"}
    minted = await http.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers=jwt_auth,
        json={"permissions": {"issues": "read"}},
    )
    auth = {"Authorization": f"Bearer {minted.json()['token']}"}
    number = hub.open_issue(OWNER, NAME, title="t", body="b", author="alice")
    assert (await http.get("repos/octo/elsewhere", headers=auth)).status_code == 404
    assert (await http.get(f"repos/octo/widgets/issues/{number}", headers=auth)).status_code == 200
    denied = await http.post(
        f"repos/octo/widgets/issues/{number}/comments", headers=auth, json={"body": "x"}
    )
    assert denied.status_code == 403
    assert denied.json()["message"] == "Resource not accessible by integration"
    too_much = await http.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers=jwt_auth,
        json={"permissions": {"administration": "write"}},
    )
    assert too_much.status_code == 422
    missing = await http.post("app/installations/999/access_tokens", headers=jwt_auth)
    assert missing.status_code == 404
    assert hub.violations == []


# -- operations -------------------------------------------------------------------------


async def test_tokens_narrowed_to_repositories(
    hub: FakeGitHub, http: httpx.AsyncClient, pem: str
) -> None:
    hub.add_repo(OWNER, "gadgets", installation_id=INSTALLATION)
    jwt_auth = {"Authorization": f"Bearer {make_jwt(pem)}"}
    url = f"app/installations/{INSTALLATION}/access_tokens"
    minted = await http.post(url, headers=jwt_auth, json={"repositories": ["widgets"]})
    assert [r["name"] for r in minted.json()["repositories"]] == ["widgets"]
    auth = {"Authorization": f"token {minted.json()['token']}"}
    assert (await http.get("repos/octo/widgets", headers=auth)).status_code == 200
    assert (await http.get("repos/octo/gadgets", headers=auth)).status_code == 404
    unknown = await http.post(url, headers=jwt_auth, json={"repositories": ["nope"]})
    assert unknown.status_code == 422
    assert hub.violations == []
