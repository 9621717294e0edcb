"""`teaparty jobs view` as a person meets it, in a real browser (headless chromium): the
link it prints opens the job's page; the board changes while the job runs without a
reload; a transcript opens; nothing is served without the launch's token; agent text is
escaped and secrets masked. Screenshots at desktop and phone widths are kept in
build/screenshots (or $TEAPARTY_SCREENSHOTS)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser import DESKTOP, PHONE, Browser
from jobs_cli_support import CLI
from local_repo import ENV, make_repo
from terminal import Terminal

pytestmark = pytest.mark.timeout(240)
ROOT = Path(__file__).resolve().parent.parent
SOURCE_ENV = {**ENV, "PYTHONPATH": str(ROOT)}  # the processes run this checkout's code
# A secret of the viewer's environment (the run's does not hold it, so the job goes on), as
# an agent might have echoed it: the page masks it wherever it shows up.
SECRET = "s3cr3t-" + "q7Lw2Zp9" * 3
TITLE = f"Add <b>docs</b> & mention {SECRET}"


def shots() -> Path:
    return Path(os.environ.get("TEAPARTY_SCREENSHOTS") or ROOT / "build" / "screenshots")


@pytest.fixture
def browser() -> Iterator[Browser]:
    with Browser() as opened:
        yield opened


@contextlib.contextmanager
def viewer(job: int, home: Path) -> Iterator[str]:
    """`teaparty jobs view JOB` running; the link it printed."""
    with subprocess.Popen(
        [*CLI, "jobs", "view", str(job), "--no-open", "--home", str(home)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**SOURCE_ENV, "DEPLOY_PASSWORD": SECRET},
    ) as process:
        assert process.stdout is not None
        try:
            first = process.stdout.readline()
            assert first.startswith(f"job {job}'s page: http://127.0.0.1:"), first
            yield first.split(": ", 1)[1].strip()
        finally:
            process.terminate()
            process.wait(timeout=30)


def status(url: str, cookie: str | None = None) -> int:
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


def test_a_job_page_follows_the_job_live_and_opens_its_transcripts(
    browser: Browser, tmp_path: Path
) -> None:
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    run = [*CLI, "run", "--title", TITLE, "--home", str(home), "--plain"]
    with Terminal(run, repo, SOURCE_ENV) as term:
        term.expect("your answer [yes/no]: ")  # the plan is on the board; the run waits
        with viewer(1, home) as url:
            browser.open(url)
            assert browser.evaluate("location.search") == "", "the token left the address"
            assert browser.until("!!document.querySelector('#task-1 .state')")
            assert browser.text("#task-1 .state") == "pending"
            heading = browser.text("h1")
            assert "<b>docs</b>" in heading, "agent and user text is shown, not rendered"
            assert SECRET not in browser.evaluate("document.documentElement.outerHTML")
            browser.screenshot(shots() / "job-waiting-desktop.png", DESKTOP)
            browser.screenshot(shots() / "job-waiting-phone.png", PHONE)
            browser.evaluate("window.notReloaded = true")

            term.send("yes\n")
            assert term.wait() == 0, term.output
            browser.until("document.querySelector('#state').innerText === 'done'")
            assert browser.text("#task-1 .state") == "done"
            assert browser.evaluate("window.notReloaded === true"), "it changed in place"
            browser.screenshot(shots() / "job-done-desktop.png", DESKTOP)

            browser.open_transcript("project-lead")
            transcript = browser.text()
            assert "project-lead" in browser.text("h1")
            assert "task_create" in transcript
            assert "dispatch" in transcript
            browser.screenshot(shots() / "transcript-phone.png", PHONE)


def test_nothing_is_served_without_the_launch_token(tmp_path: Path) -> None:
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    parked = subprocess.run(
        [*CLI, "run", "--title", "Add docs", "--no-input", "--home", str(home)],
        cwd=repo,
        env=SOURCE_ENV,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert parked.returncode == 4, parked.stderr
    with viewer(1, home) as url:
        base, _, token = url.partition("?token=")
        origin = base.rsplit("/jobs/", 1)[0]
        for path in ("/jobs/1", "/jobs", "/jobs/1/live", "/jobs/1/c/job:1", "/"):
            assert status(origin + path) == 403, path
            assert status(origin + path, cookie="teaparty_view=forged") == 403, path
            assert status(f"{origin}{path}?token=forged") == 403, path
        assert status(base, cookie=f"teaparty_view={token}") == 200
        assert status(f"{origin}/jobs/2", cookie=f"teaparty_view={token}") == 404
        other = f"{origin}/jobs/1/c/job:2"  # another job's conversation, through job 1
        assert status(other, cookie=f"teaparty_view={token}") == 404
    with viewer(1, home) as second:
        origin = second.split("/jobs/", 1)[0]
        assert status(f"{origin}/jobs/1", cookie=f"teaparty_view={token}") == 403, (
            "a token is one launch's"
        )


def test_viewing_a_job_that_is_not_there_says_so(tmp_path: Path) -> None:
    done = subprocess.run(
        [*CLI, "jobs", "view", "7", "--no-open", "--home", str(tmp_path / "home")],
        env=SOURCE_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (
        1,
        "teaparty jobs view: no job 7 in this state directory\n",
    )
