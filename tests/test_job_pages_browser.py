"""The job page as a maintainer meets it on `teaparty serve`, in a real browser (headless
chromium) against the GitHub stand-in: the tracking comment's link shows a stranger to the
sign-in page; signing in with GitHub comes back to the job; the board changes while the job
runs without a reload; a transcript opens; someone without access gets 404; a forged and an
expired cookie get the sign-in page. Screenshots at desktop and phone widths are kept in
build/screenshots (or $TEAPARTY_SCREENSHOTS)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from app_harness import OWNER, REPO, bodies, make_hub, server_env
from browser import DESKTOP, PHONE, Browser

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub
from bot.server.sessions import SESSION_COOKIE, SESSION_TTL, Session, Sessions, load_keys

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parent.parent
TITLE = "Add <b>docs</b>"


def shots() -> Path:
    return Path(os.environ.get("TEAPARTY_SCREENSHOTS") or ROOT / "build" / "screenshots")


def wait(check: Callable[[], object], what: str, limit: float = 90.0) -> object:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if value := check():
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(url + "/healthz", timeout=5) as answer:
            return int(answer.status) == 200
    except (urllib.error.URLError, OSError):
        return False


@pytest.fixture
def browser() -> Iterator[Browser]:
    with Browser() as opened:
        yield opened


def test_a_maintainer_signs_in_from_the_tracking_comment_and_follows_the_job(
    browser: Browser, tmp_path: Path
) -> None:
    pem, port = private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem)
    hub.add_user("alice", "maintain")
    public = f"http://127.0.0.1:{port}"
    hub.oauth.callback_urls.append(public + "/auth/callback")
    home = tmp_path / "home"
    with hub.serve_in_thread() as api_url:
        env = server_env(hub, api_url, home, pem) | {
            "PYTHONPATH": str(ROOT),
            "TEAPARTY_PUBLIC_URL": public,
            "GITHUB_CLIENT_ID": hub.state.client_id,
            "GITHUB_CLIENT_SECRET": hub.oauth.client_secret,
        }
        with (tmp_path / "serve.log").open("wb") as log:
            server = subprocess.Popen(
                [sys.executable, "-m", "bot.cli", "serve", "--port", str(port)],
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait(lambda: healthy(public), "teaparty serve to answer")
            follow_the_job(browser, hub, public, home)
        finally:
            server.terminate()
            server.wait(timeout=60)
    assert hub.violations == [], hub.violations
    said = (tmp_path / "serve.log").read_text()
    assert f"job pages at {public}/jobs" in said
    assert len(hub.oauth.issued) == 2  # alice's and the stranger's
    for secret in (hub.oauth.client_secret, *hub.oauth.issued):
        assert secret not in said
        for path in home.rglob("*"):
            if path.is_file():
                assert secret.encode() not in path.read_bytes(), path


def follow_the_job(browser: Browser, hub: FakeGitHub, public: str, home: Path) -> None:
    number = hub.open_issue(OWNER, REPO, title=TITLE, body="Docs, please.", author="alice")
    asyncio.run(hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice"))
    wait(lambda: bodies(hub, number, "gate:"), "the plan question")
    (tracking,) = bodies(hub, number, "job:")
    link = re.search(r"\[the job's page, live\]\(([^)]+)\)", tracking)
    assert link is not None, tracking
    assert link.group(1) == f"{public}/jobs/1"

    browser.open(link.group(1))  # signed out: the sign-in page, and nothing of the job
    assert browser.text("h1") == "Sign in"
    assert "docs" not in browser.text()
    browser.screenshot(shots() / "serve-sign-in-phone.png", PHONE)

    hub.oauth.signed_in = "alice"
    browser.open(browser.evaluate("document.querySelector('#sign-in').href"))
    assert browser.evaluate("location.href") == link.group(1), "back where the link pointed"
    [session] = [c for c in browser.cookies() if c["name"] == SESSION_COOKIE]
    assert session["httpOnly"] is True
    assert session["sameSite"] == "Lax"
    assert browser.until("!!document.querySelector('#task-1 .state')")
    assert browser.text("#task-1 .state") == "pending"
    assert "<b>docs</b>" in browser.text("h1"), "the issue's text is shown, not rendered"
    browser.screenshot(shots() / "serve-job-waiting-desktop.png", DESKTOP)
    browser.screenshot(shots() / "serve-job-waiting-phone.png", PHONE)
    browser.evaluate("window.notReloaded = true")

    asyncio.run(hub.comment_as(OWNER, REPO, number, "alice", "yes"))
    browser.until("document.querySelector('#task-1 .state').innerText === 'done'", limit=120)
    assert browser.evaluate("window.notReloaded === true"), "it changed in place"
    browser.screenshot(shots() / "serve-job-done-desktop.png", DESKTOP)

    browser.open_transcript("project-lead")
    assert "project-lead" in browser.text("h1")
    assert "task_create" in browser.text()
    browser.screenshot(shots() / "serve-transcript-phone.png", PHONE)

    refused_cookies(browser, link.group(1), home)
    stranger(browser, hub, link.group(1))


def refused_cookies(browser: Browser, page: str, home: Path) -> None:
    """A forged cookie, and one sealed with the server's own key but 8 hours old."""
    old = time.time() - SESSION_TTL - 60
    expired = Sessions(load_keys(home, now=time.time()), clock=lambda: old)
    for value in ("forged", expired.seal(Session("alice", "ghu_whatever"))):
        browser.call("Network.clearBrowserCookies", session=True)
        browser.call("Network.setCookie", session=True, name=SESSION_COOKIE, value=value, url=page)
        browser.open(page)
        assert browser.text("h1") == "Sign in", value


def stranger(browser: Browser, hub: FakeGitHub, page: str) -> None:
    """Someone GitHub shows the (public) repository to, without triage or write: 404."""
    browser.call("Network.clearBrowserCookies", session=True)
    hub.oauth.signed_in = "stranger"
    browser.open(page)
    browser.open(browser.evaluate("document.querySelector('#sign-in').href"))
    assert browser.text("h1") == "No job 1 here"
    fetched = browser.call(
        "Runtime.evaluate",
        session=True,
        expression=f"fetch({page!r}).then(r => r.status)",
        awaitPromise=True,
        returnByValue=True,
    )
    assert fetched["result"]["value"] == 404
    browser.open(page.rsplit("/", 1)[0])
    assert "/jobs/1" not in browser.evaluate("document.documentElement.outerHTML")
