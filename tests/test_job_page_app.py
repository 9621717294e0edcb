"""The job page's application in this process (the browser test drives it as a person does,
in another): the token's door, each page over a real store a real run made, the live
stream's page and end, its bound, and a transcript's pages."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from jobs_cli_support import CLI
from local_repo import ENV, make_repo

from bot import job_html
from bot.job_viewer import COOKIE, Viewer, view, viewer_app
from orchestrator.api import shipped_org_dir

TOKEN = "launch-token"
SECRET = "s3cr3t-" + "q7Lw2Zp9" * 3


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A state directory with job 1 done (its title holds HTML and a secret value) and job 2
    parked at its plan question."""
    root = tmp_path_factory.mktemp("page")
    repo, home = make_repo(root / "widgets"), root / "home"
    for title, how in ((f"Add <b>docs</b> {SECRET}", "--yes"), ("Park it", "--no-input")):
        done = subprocess.run(
            [*CLI, "run", "--title", title, how, "--home", str(home), "--model", "scripted"],
            cwd=repo, env=ENV, capture_output=True, text=True, timeout=90,
        )  # fmt: skip
        assert done.returncode in (0, 4), done.stderr
    return home


@contextlib.asynccontextmanager
async def client(viewer: Viewer) -> AsyncIterator[httpx.AsyncClient]:
    app = viewer_app(viewer)
    async with viewer.lifespan(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://viewer") as opened:
            yield opened


@pytest.fixture
async def signed_in(home: Path) -> AsyncIterator[httpx.AsyncClient]:
    viewer = Viewer(home, org_dir=shipped_org_dir(), env={"DEPLOY_PASSWORD": SECRET},
                    token=TOKEN, poll_s=0.01)  # fmt: skip
    async with client(viewer) as opened:
        opened.cookies.set(COOKIE, TOKEN)
        yield opened


async def test_only_the_launch_token_opens_it(home: Path) -> None:
    viewer = Viewer(home, org_dir=shipped_org_dir(), env={}, token=TOKEN)
    async with client(viewer) as opened:
        assert (await opened.get("/jobs/1")).status_code == 403
        opened.cookies.set(COOKIE, "forged")
        assert (await opened.get("/jobs/1")).status_code == 403
        opened.cookies.clear()
        entered = await opened.get(f"/jobs/1?token={TOKEN}")
        assert entered.status_code == 303
        assert entered.headers["location"] == "http://viewer/jobs/1"
        cookie = entered.headers["set-cookie"]
        assert f"{COOKIE}={TOKEN}" in cookie
        assert "HttpOnly" in cookie
        assert "SameSite=strict" in cookie
        opened.cookies.set(COOKIE, TOKEN)
        assert (await opened.get("/jobs/1")).status_code == 200


async def test_a_job_page_shows_its_board_questions_and_who_did_what(
    signed_in: httpx.AsyncClient,
) -> None:
    page = await signed_in.get("/jobs/1")
    assert page.status_code == 200
    assert page.headers["content-security-policy"].startswith("default-src 'none'")
    text = page.text
    assert "Add &lt;b&gt;docs&lt;/b&gt;" in text, "agent and user text is escaped"
    assert SECRET not in text
    assert "[DEPLOY_PASSWORD]" in text
    assert 'id="task-1"' in text
    assert "Who did what" in text
    assert "answered <b>yes</b>" in text
    assert "data-stream" not in text, "a done job's page streams nothing"
    waiting = (await signed_in.get("/jobs/2")).text
    assert 'data-stream="/jobs/2/live"' in waiting
    assert "open (yes / no)" in waiting
    listing = (await signed_in.get("/jobs")).text
    assert '<a href="/jobs/1">1</a>' in listing
    assert '<a href="/jobs/2">2</a>' in listing
    assert (await signed_in.get("/")).status_code == 303
    missing = await signed_in.get("/jobs/9")
    assert missing.status_code == 404
    assert "No job 9 here" in missing.text


async def test_a_transcript_opens_a_page_at_a_time(
    signed_in: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = await signed_in.get("/jobs/1/c/job:1")
    assert whole.status_code == 200
    assert "office-manager" in whole.text
    assert "→ <b>send</b>" in whole.text
    monkeypatch.setattr(job_html, "PAGE_MESSAGES", 1)
    first = (await signed_in.get("/jobs/1/c/job:1")).text
    assert "?after=1" in first, "a link to the later messages"
    second = (await signed_in.get("/jobs/1/c/job:1?after=1")).text
    assert "earlier" in second
    other = await signed_in.get("/jobs/1/c/job:2")  # job 2's conversation, through job 1
    assert other.status_code == 404


async def test_the_live_stream_sends_the_page_and_ends_with_the_job(
    signed_in: httpx.AsyncClient,
) -> None:
    live = await signed_in.get("/jobs/1/live")
    assert live.headers["content-type"].startswith("text/event-stream")
    assert live.text.startswith("event: page\ndata: ")
    assert live.text.endswith("event: end\ndata: {}\n\n")
    gone = await signed_in.get("/jobs/9/live")
    assert gone.text == "event: end\ndata: {}\n\n"


async def test_live_streams_are_bounded(home: Path) -> None:
    viewer = Viewer(home, org_dir=shipped_org_dir(), env={}, token=TOKEN, live_streams=0)
    async with client(viewer) as opened:
        opened.cookies.set(COOKIE, TOKEN)
        refused = await opened.get("/jobs/2/live")
        assert refused.status_code == 503
        assert refused.headers["retry-after"] == "10"
        page = await opened.get("/jobs/2")
        assert page.status_code == 200, "the page itself is whole without its stream"


async def test_view_prints_a_link_that_opens_the_page_until_it_is_stopped(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    served = asyncio.create_task(
        view(1, home=home, org_dir=shipped_org_dir(), env={}, open_browser=True)
    )
    printed = ""
    for _ in range(600):  # the server binds, then prints (no screen here: nothing opened)
        printed += capsys.readouterr().out
        if "job 1's page: " in printed or served.done():
            break
        await asyncio.sleep(0.05)
    link = printed.split("job 1's page: ", 1)[1].split()[0]
    try:
        async with httpx.AsyncClient() as browser:
            entered = await browser.get(link)
            assert entered.status_code == 303
            assert (await browser.get(link.split("?")[0])).status_code == 200
    finally:
        served.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await served
