"""The served job pages in this process (tests/test_job_pages_browser.py drives them through
`teaparty serve` and a browser): the sign-in's door, its state, the session cookie (forged,
expired), who sees which job (404 for the rest), the readers option, the role cache, and the
pages the viewer draws, over a store an in-process App filled with two GitHub jobs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from app_harness import OWNER, REPO, app_settings, bodies, in_process, until, world
from fastapi import FastAPI

from bot.fakehub.hub import FakeGitHub
from bot.job_pages import JobPages
from bot.server.sessions import SESSION_COOKIE, SESSION_TTL, Session, Sessions, load_keys
from bot.settings import Settings
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

pytestmark = pytest.mark.timeout(180)
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
PUBLIC = "https://tea.example"
OPEN_REPO = "open"
READERS = "humans:\n  decider: alice\njob_page:\n  readers: true\n"


@dataclass
class Made:
    hub: FakeGitHub
    home: Path
    pem: str


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Made:
    """Job 1 on octo/widgets and job 2 on octo/open (whose project opens pages to readers),
    both parked at their plan question; the App stopped."""
    root = tmp_path_factory.mktemp("pages")
    hub, port, pem = world(root)
    hub.add_repo(OWNER, OPEN_REPO, installation_id=1)
    hub.add_user("tess", "triage")
    hub.add_user("rita", "read")

    async def run() -> None:
        await hub.push_to_branch(
            OWNER, OPEN_REPO, "main", "alice", {".teaparty/project.yaml": READERS}
        )
        async with hub.serve() as api_url:
            settings = app_settings(
                hub, api_url, root / "home", pem, public_url=PUBLIC, client_id="Iv1.x",
                client_secret="unused",
            )  # fmt: skip
            demo = DemoModel()
            async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE):
                for repo, title in ((REPO, "Add <b>docs</b>"), (OPEN_REPO, "Open one")):
                    number = hub.open_issue(OWNER, repo, title=title, body="Docs.", author="alice")
                    await hub.label_issue(OWNER, repo, number, "teaparty", sender="alice")
                    await until(partial(bodies, hub, number, "gate:", repo), what="the question")

    asyncio.run(run())
    hub.oauth.callback_urls.append(PUBLIC + "/auth/callback")
    return Made(hub, root / "home", pem)


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@dataclass
class Site:
    web: httpx.AsyncClient
    pages: JobPages
    hub: FakeGitHub
    clock: Clock

    async def sign_in(self, login: str, *, start: str = "/jobs") -> httpx.Response:
        """Sign in as `login` the way a browser does; GitHub's redirect back, answered."""
        self.hub.oauth.signed_in = login
        off = await self.web.get("/auth/signin", params={"next": start})
        assert off.status_code == 302
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=self.hub.asgi)) as github:
            back = await github.get(off.headers["location"])
        assert back.status_code == 302, back.text
        return await self.web.get(back.headers["location"])


@pytest.fixture
async def site(made: Made) -> AsyncIterator[Site]:
    clock = Clock()
    settings = Settings(
        app_id="4242",
        private_key=made.pem,
        webhook_secret="unused",
        home=made.home,
        api_url="http://hub/",
        server_url=made.hub.server_url,  # file://: the sign-in goes to the API's host
        public_url=PUBLIC,
        client_id=made.hub.state.client_id,
        client_secret=made.hub.oauth.client_secret,
        page_streams=1,
    )
    app = FastAPI()
    hub_transport = httpx.ASGITransport(app=made.hub.asgi)
    pages = await JobPages.start(
        settings, {"DEPLOY_PASSWORD": "pw-" + "x7" * 8}, app, transport=hub_transport, clock=clock
    )
    assert pages is not None
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=PUBLIC) as web:
        yield Site(web, pages, made.hub, clock)
    await pages.aclose()
    assert made.hub.violations == []


def test_the_tracking_comment_links_to_the_jobs_page(made: Made) -> None:
    (tracking,) = bodies(made.hub, 1, "job:")
    assert f"[the job's page, live]({PUBLIC}/jobs/1)" in tracking
    (other,) = bodies(made.hub, 1, "job:", OPEN_REPO)
    assert f"({PUBLIC}/jobs/2)" in other


async def test_signed_out_sees_only_the_sign_in_page(site: Site) -> None:
    for path in ("/jobs", "/jobs/1", "/jobs/1/c/anything", "/jobs/99"):
        page = await site.web.get(path)
        assert page.status_code == 401
        assert "Sign in with GitHub" in page.text
        assert "docs" not in page.text
    assert (await site.web.get("/jobs/1/live")).status_code == 401


async def test_a_maintainer_signs_in_and_sees_the_job(site: Site) -> None:
    back = await site.sign_in("alice", start="/jobs/1")
    assert back.status_code == 303
    assert back.headers["location"] == "/jobs/1"
    cookie = back.headers["set-cookie"]
    assert cookie.startswith(SESSION_COOKIE + "=")
    for flag in ("HttpOnly", "Secure", "SameSite=lax", f"Max-Age={SESSION_TTL}", "Path=/"):
        assert flag in cookie
    page = await site.web.get("/jobs/1")
    assert page.status_code == 200
    assert "Add &lt;b&gt;docs&lt;/b&gt;" in page.text
    assert "default-src 'none'" in page.headers["content-security-policy"]
    listed = await site.web.get("/jobs")
    assert 'href="/jobs/1"' in listed.text
    assert 'href="/jobs/2"' in listed.text
    link = next(part.split('"')[0] for part in page.text.split('href="/jobs/1/c/')[1:])
    transcript = await site.web.get(f"/jobs/1/c/{link}")
    assert transcript.status_code == 200
    assert "messages" in transcript.text


async def test_someone_without_access_gets_404_and_an_empty_list(site: Site) -> None:
    await site.sign_in("stranger")
    job = await site.web.get("/jobs/1")
    nothing = await site.web.get("/jobs/99")
    assert (job.status_code, nothing.status_code) == (404, 404)
    assert job.text == nothing.text.replace("No job 99", "No job 1")  # nothing told apart
    assert (await site.web.get("/jobs/1/live")).status_code == 404
    listed = await site.web.get("/jobs")
    assert 'href="/jobs/1"' not in listed.text
    assert 'href="/jobs/2"' in listed.text  # its project opens it to readers, as everyone is


async def test_readers_see_only_what_the_project_opens_and_triage_sees_all(site: Site) -> None:
    await site.sign_in("rita")
    assert (await site.web.get("/jobs/1")).status_code == 404
    assert (await site.web.get("/jobs/2")).status_code == 200
    site.web.cookies.clear()
    await site.sign_in("tess")
    assert (await site.web.get("/jobs/1")).status_code == 200


async def test_roles_are_asked_of_github_once_a_minute(site: Site) -> None:
    await site.sign_in("tess")

    def asked() -> int:
        return sum(r.operation_id == "repos/get" for r in site.hub.requests)

    before = asked()
    for _ in range(3):
        assert (await site.web.get("/jobs/1")).status_code == 200
    assert asked() == before + 1
    site.clock.now += 61
    await site.web.get("/jobs/1")
    assert asked() == before + 2
    # a server up for months forgets the pairs it no longer needs
    stale = site.clock.now - 61
    site.pages._roles.update({(f"u{n}", "o/r"): ("read", stale) for n in range(1100)})
    site.clock.now += 61
    await site.web.get("/jobs/1")
    assert list(site.pages._roles) == [("tess", f"{OWNER}/{REPO}".lower())]


async def test_forged_and_expired_cookies_are_refused(site: Site, made: Made) -> None:
    await site.sign_in("alice")
    good = site.web.cookies[SESSION_COOKIE]
    site.web.cookies.set(SESSION_COOKIE, good[:-4] + "AAAA", domain="tea.example")
    assert (await site.web.get("/jobs/1")).status_code == 401
    other = Sessions(load_keys(made.home / "elsewhere", now=site.clock()), clock=site.clock)
    site.web.cookies.set(
        SESSION_COOKIE, other.seal(Session("alice", "ghu_x")), domain="tea.example"
    )
    assert (await site.web.get("/jobs/1")).status_code == 401
    site.web.cookies.set(SESSION_COOKIE, good, domain="tea.example")
    assert (await site.web.get("/jobs/1")).status_code == 200
    site.clock.now += SESSION_TTL + 1
    assert (await site.web.get("/jobs/1")).status_code == 401


async def test_a_state_is_bound_to_its_browser_and_taken_once(site: Site) -> None:
    site.hub.oauth.signed_in = "alice"
    off = await site.web.get("/auth/signin", params={"next": "//evil.example/x"})
    assert "Path=/auth" in off.headers["set-cookie"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=site.hub.asgi)) as github:
        back = (await github.get(off.headers["location"])).headers["location"]
    query = parse_qs(urlsplit(back).query)
    forged = back.replace(query["state"][0], "forged-state")
    assert (await site.web.get(forged)).status_code == 400
    async with httpx.AsyncClient(transport=site.web._transport, base_url=PUBLIC) as another:
        assert (await another.get(back)).status_code == 400  # not the browser that began it
    first = await site.web.get(back)
    assert (first.status_code, first.headers["location"]) == (303, "/jobs")  # never off-site
    assert (await site.web.get(back)).status_code == 400  # taken once
    denied = await site.web.get("/auth/callback", params={"error": "access_denied"})
    assert denied.status_code == 400


async def test_a_code_github_refuses_signs_nobody_in(site: Site) -> None:
    site.hub.oauth.signed_in = "alice"
    off = await site.web.get("/auth/signin")
    state = parse_qs(urlsplit(off.headers["location"]).query)["state"][0]
    refused = await site.web.get("/auth/callback", params={"code": "made-up", "state": state})
    assert refused.status_code == 400
    assert SESSION_COOKIE not in site.web.cookies


async def test_the_live_part_streams_its_own_bound_and_ends_at_shutdown(site: Site) -> None:
    await site.sign_in("alice")
    streaming = asyncio.create_task(site.web.get("/jobs/1/live"))
    await until(site.pages.viewer.streams.locked, what="the stream to open")  # its bound: 1
    second = await site.web.get("/jobs/1/live")
    assert second.status_code == 503
    site.pages.close()
    live = await streaming
    assert live.headers["content-type"].startswith("text/event-stream")
    assert live.text.startswith("event: page\ndata: ")
    assert live.text.endswith("event: end\ndata: {}\n\n")


async def test_no_public_url_no_pages(made: Made) -> None:
    settings = Settings(app_id="1", private_key="", webhook_secret="", home=made.home)
    assert await JobPages.start(settings, {}, FastAPI()) is None
