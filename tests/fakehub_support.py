"""The local GitHub stand-in's test fixtures and helpers (a pytest plugin, see conftest)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from githubkit import AppAuthStrategy, GitHub
from githubkit.cache import MemCacheStrategy

from bot.fakehub.hub import FakeGitHub
from bot.github.client import GitHubApp

APP_ID = 4242
INSTALLATION = 77
OWNER, NAME = "octo", "widgets"
SECRET = "It's a Secret to Everybody"
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "Alice",
    "GIT_AUTHOR_EMAIL": "alice@example.com",
    "GIT_COMMITTER_NAME": "Alice",
    "GIT_COMMITTER_EMAIL": "alice@example.com",
}


def _pem(key: rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


@pytest.fixture(scope="session")
def pem() -> str:
    return _pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.fixture
def hub(tmp_path: Path, pem: str) -> FakeGitHub:
    hub = FakeGitHub(tmp_path / "remotes", app_id=APP_ID, private_key_pem=pem)
    hub.add_repo(OWNER, NAME, installation_id=INSTALLATION)
    return hub


def app_hub(root: Path, pem: str, **roles: str) -> FakeGitHub:
    """The stand-in with octo/widgets (the App's installation its first), each login in
    `roles` a collaborator with that role."""
    hub = FakeGitHub(root, app_id=APP_ID, private_key_pem=pem)
    hub.add_repo(OWNER, NAME)
    for login, role in roles.items():
        hub.add_user(login, role)
    return hub


def app_client(hub: FakeGitHub, pem: str, **options: Any) -> GitHubApp:
    """The App's client over `hub`, in-process (no socket); no pause between writes unless
    `options` (as GitHubApp takes them) say otherwise."""
    return GitHubApp(
        app_id=str(APP_ID),
        private_key=pem,
        api_url="http://hub/",
        transport=httpx.ASGITransport(app=hub.asgi),
        **{"write_interval_s": 0.0, **options},
    )


@pytest.fixture
async def github(hub: FakeGitHub, pem: str) -> AsyncIterator[GitHubApp]:
    """The App's client over `hub` (app_client)."""
    app = app_client(hub, pem)
    yield app
    await app.aclose()


@pytest.fixture
async def base_url(hub: FakeGitHub) -> AsyncIterator[str]:
    async with hub.serve() as url:
        yield url


def _app_client(base_url: str, pem: str) -> GitHub[Any]:
    # githubkit's default token cache is process-wide, keyed by app and installation id:
    # a fresh one per client keeps one test's hub from seeing another hub's token.
    return GitHub(
        AppAuthStrategy(APP_ID, pem),
        base_url=base_url,
        http_cache=False,
        auto_retry=False,
        cache_strategy=MemCacheStrategy(),
    )


@pytest.fixture
async def gh(base_url: str, pem: str) -> AsyncIterator[GitHub[Any]]:
    app_gh = _app_client(base_url, pem)
    async with app_gh.with_auth(app_gh.auth.as_installation(INSTALLATION)) as inst:
        yield inst


def make_jwt(pem: str, *, iss: int | str = APP_ID, exp_in: int = 540) -> str:
    now = int(time.time())
    return jwt.encode(
        {"iat": now - 60, "exp": now + exp_in, "iss": str(iss)}, pem, algorithm="RS256"
    )


async def mint_token(client: httpx.AsyncClient, pem: str) -> str:
    response = await client.post(
        f"app/installations/{INSTALLATION}/access_tokens",
        headers={"Authorization": f"Bearer {make_jwt(pem)}"},
    )
    assert response.status_code == 201, response.text
    token: str = response.json()["token"]
    return token


@pytest.fixture
async def http(base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=base_url) as client:
        yield client


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True
    )
    return done.stdout.strip()


def push_branch(hub: FakeGitHub, work: Path, branch: str, files: dict[str, str]) -> None:
    """Clone the bare remote through its file:// URL, commit `files` on `branch`, push."""
    git(work.parent, "clone", "-q", f"{hub.server_url}/{OWNER}/{NAME}.git", str(work))
    git(work, "checkout", "-q", "-b", branch)
    for name, text in files.items():
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(text)
    git(work, "add", "-A")
    if files:
        git(work, "commit", "-q", "-m", f"work on {branch}")
    git(work, "push", "-q", "origin", branch)
