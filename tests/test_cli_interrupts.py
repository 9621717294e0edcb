"""`teaparty run` with the Anthropic model: the key is checked before a job starts, and
Ctrl-C stops a run at once in the middle of a model call or of a git clone.

The model is a local stand-in for the Messages API on 127.0.0.1 (the anthropic SDK talks
to it through ANTHROPIC_BASE_URL): it refuses one key, lists models for the other, and
never answers a message, as an API under load may. A slow git is a wrapper on PATH that
sleeps on `clone` and `fetch`. "At once" is shown without a clock: the run ends while the
call it was in would still be going on (it never ends by itself), however loaded the machine.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from jobs_cli_support import jobs_json, teaparty
from local_repo import ENV, git, make_repo
from terminal import Terminal

CLI = [sys.executable, "-m", "bot.cli"]
SOURCE = Path(__file__).resolve().parent.parent  # run from here, `-m bot.cli` is this checkout's
pytestmark = pytest.mark.timeout(120)
GOOD_KEY, BAD_KEY = "sk-ant-good", "sk-ant-bad"


class Anthropic(ThreadingHTTPServer):
    """GET /v1/models answers by key; POST /v1/messages is held until the server closes."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.asked = threading.Event()  # a model call is under way
        self.closing = threading.Event()
        self.overloaded = False  # answer every message 529 at once (the SDK's retries quick)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Anthropic

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        bearer = self.headers.get("authorization", "").removeprefix("Bearer ")
        if GOOD_KEY not in (self.headers.get("x-api-key"), bearer):  # the SDK sends either
            error = {"type": "authentication_error", "message": "invalid x-api-key"}
            return self._json(401, {"type": "error", "error": error})
        return self._json(200, {"data": [], "has_more": False, "first_id": None, "last_id": None})

    def do_POST(self) -> None:
        self.server.asked.set()
        if self.server.overloaded:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            error = {"type": "overloaded_error", "message": "Overloaded"}
            return self._json(529, {"type": "error", "error": error}, {"retry-after-ms": "1"})
        self.server.closing.wait()  # never answered: only the fixture's end lets it go

    def _json(self, status: int, body: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def anthropic() -> Iterator[Anthropic]:
    server = Anthropic()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.closing.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


def env_for(anthropic: Anthropic, key: str) -> dict[str, str]:
    return {
        **ENV,
        "ANTHROPIC_API_KEY": key,
        "ANTHROPIC_BASE_URL": anthropic.url,
        "TEAPARTY_SANDBOX": "off",  # the interrupt is under test, not the confinement
    }


def run_args(tmp_path: Path) -> list[str]:
    return [
        *CLI,
        "run",
        "--title",
        "Add docs",
        "--model",
        "anthropic",
        "--home",
        str(tmp_path / "home"),
    ]


def test_a_refused_key_stops_the_run_before_a_job_exists(
    anthropic: Anthropic, repo: Path, tmp_path: Path
) -> None:
    result = subprocess.run(
        run_args(tmp_path),
        capture_output=True,
        text=True,
        cwd=repo,
        env=env_for(anthropic, BAD_KEY),
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"teaparty run: ANTHROPIC_API_KEY was rejected (HTTP 401) by {anthropic.url}"
    )
    assert BAD_KEY not in result.stderr + result.stdout
    assert not (tmp_path / "home").exists()


def test_an_unreachable_api_is_an_environment_error(repo: Path, tmp_path: Path) -> None:
    closed = Anthropic()
    url = closed.url
    closed.server_close()  # nothing listens there now
    env = {**ENV, "ANTHROPIC_API_KEY": GOOD_KEY, "ANTHROPIC_BASE_URL": url}
    result = subprocess.run(
        run_args(tmp_path), capture_output=True, text=True, cwd=repo, env=env, timeout=60
    )
    assert result.returncode == 3
    assert result.stderr.startswith(f"teaparty run: cannot reach {url}: ")


def test_ctrl_c_during_a_model_call_stops_at_once(
    anthropic: Anthropic, repo: Path, tmp_path: Path
) -> None:
    with Terminal(run_args(tmp_path), repo, env_for(anthropic, GOOD_KEY)) as term:
        term.until(anthropic.asked.is_set)
        term.send("\x03")
        code = term.wait()  # the model call never ends: ending at all is ending at once
    assert code == 130, term.output
    assert "Traceback" not in term.output
    assert f"Job 1 is saved; continue it with: teaparty run --repo {repo} --resume 1" in term.output


def test_ctrl_c_during_git_stops_at_once(repo: Path, tmp_path: Path) -> None:
    # The engine runs git from a fixed system path, never from PATH; so the slow git is
    # put in place by the launcher, inside the process under test, and nowhere else.
    marker = tmp_path / "git-is-slow"
    slow_git = tmp_path / "slow-git"
    slow_git.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in clone|fetch|worktree) '
        f'touch {marker}; sleep 600;; esac; done\nexec {shutil.which("git")} "$@"\n'
    )
    slow_git.chmod(0o755)
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import sys\n"
        "import orchestrator.workspace.git as git\n"
        f"git.git_binary = lambda: {str(slow_git)!r}\n"
        "from bot.cli import entry\n"
        "entry()\n"
    )
    home = tmp_path / "home"
    argv = [sys.executable, str(launcher), "run", "--title", "Add docs", "--model", "scripted"]
    argv += ["--yes", "--home", str(home)]
    with Terminal(argv, repo, ENV) as term:
        term.until(marker.exists)
        term.send("\x03")
        code = term.wait()  # well before the slow git would end
    assert code == 130, term.output
    assert "Traceback" not in term.output
    assert f"Job 1 is saved; continue it with: teaparty run --repo {repo} --resume 1" in term.output
    resumed = teaparty("run", "--resume", "1", "--yes", home=home, cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    untouched = tmp_path / "untouched"
    subprocess.run(["git", "clone", "-q", str(repo), str(untouched)], check=True, env=ENV)
    clean = teaparty("run", "--title", "Add docs", "--yes", home=tmp_path / "h2", cwd=untouched)
    assert clean.returncode == 0, clean.stderr
    branch = "teaparty/job-1-add-docs^{tree}"
    assert git(repo, "rev-parse", branch) == git(untouched, "rev-parse", branch)


def test_a_run_stopped_by_ctrl_c_is_shown_interrupted_with_its_resume_command(
    anthropic: Anthropic, tmp_path: Path
) -> None:
    """While the run holds the store its job is planning; once Ctrl-C stopped it, `jobs
    list`, `show` and a `log --follow` begun beside the run say it is interrupted and how to
    resume it (the repository's and the state directory's paths quoted), and the command works."""
    repo, home = make_repo(tmp_path / "my widgets"), tmp_path / "state dir"
    argv = [*run_args(tmp_path)[:-1], str(home), "--repo", str(repo)]
    with Terminal(argv, SOURCE, env_for(anthropic, GOOD_KEY)) as term:
        term.until(anthropic.asked.is_set)
        [running] = jobs_json("list", home=home)
        assert (running["state"], running["running"], running["resume"]) == (
            "planning",
            True,
            None,
        )
        follow = subprocess.Popen(
            [*CLI, "jobs", "log", "1", "--follow", "--home", str(home)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
        )  # fmt: skip
        assert follow.stdout is not None
        assert "engine -> office-manager  [request]" in follow.stdout.readline()
        term.send("\x03")
        assert term.wait() == 130, term.output
    resume = f"teaparty run --repo '{repo}' --resume 1 --home '{home}'"
    assert f"continue it with: teaparty run --repo '{repo}' --resume 1" in term.output
    out, err = follow.communicate(timeout=60)  # it ends by itself: nothing more will come
    assert (follow.returncode, err) == (1, ""), err
    said = f"job 1 is interrupted: nothing runs it; resume it with: {resume}\n"
    assert out.endswith(said)

    listed = teaparty("jobs", "list", home=home)
    assert listed.returncode == 0, listed.stderr
    header, row, line = listed.stdout.splitlines()
    assert row.split()[:2] == ["1", str(repo).split()[0]]
    assert " interrupted " in row
    assert line == said.strip()
    [summary] = jobs_json("list", home=home)
    assert (summary["state"], summary["running"], summary["resume"]) == (
        "interrupted",
        False,
        resume,
    )
    shown = teaparty("jobs", "show", "1", home=home).stdout
    assert "  state       interrupted: planning the work\n" in shown
    assert f"  resume      {resume}\n" in shown
    again = teaparty("jobs", "log", "1", "--follow", home=home)
    assert (again.returncode, again.stdout.endswith(said)) == (1, True), again.stderr
    as_json = teaparty("jobs", "log", "1", "--follow", "--json", home=home)
    assert (as_json.returncode, as_json.stderr) == (1, said)
    assert [json.loads(line)["id"] for line in as_json.stdout.splitlines()]

    second = [*CLI, "run", "--repo", str(repo), "--title", "Fix typo", "--home", str(home)]
    with Terminal([*second, "--model", "scripted"], SOURCE, ENV) as term:
        term.expect("your answer [yes/no]: ")  # job 2's run holds the store: job 1's stopped
        listed = jobs_json("list", home=home)
        assert [(j["id"], j["state"], j["running"]) for j in listed] == [
            (2, "waiting", True),
            (1, "interrupted", False),
        ]
        assert "job 1 is interrupted" in teaparty("jobs", "list", home=home).stdout
        term.send("no\n")
        term.expect("what should the lead change? (Enter alone ends the job): ")
        term.send("\n")
        assert term.wait() == 1, term.output  # the plan refused: nothing delivered

    pasted = [*CLI, *shlex.split(resume)[1:], "--model", "scripted", "--yes"]
    resumed = subprocess.run(
        pasted, cwd=SOURCE, env=ENV, capture_output=True, text=True, timeout=90
    )
    assert resumed.returncode == 0, resumed.stderr
    assert "job 1 resumed" in resumed.stdout
    assert jobs_json("show", "1", home=home)["state"] == "done"


def test_an_interrupted_run_shows_no_retry_time_nobody_will_keep(
    anthropic: Anthropic, repo: Path, tmp_path: Path
) -> None:
    """The model is overloaded: the run waits it out, `jobs list` says until when; after
    Ctrl-C nothing will try again at that time, and the list no longer says it will."""
    anthropic.overloaded = True
    home = tmp_path / "home"

    def waiting() -> bool:
        if not anthropic.asked.is_set():  # the store is made by then (a look at one being
            return False  # migrated fails: "the teaparty holding it is older")
        listed = jobs_json("list", home=home, in_process=True)
        return bool(listed) and listed[0]["waiting"] is not None

    with Terminal(run_args(tmp_path), repo, env_for(anthropic, GOOD_KEY)) as term:
        term.until(waiting)
        assert "the model is unavailable; again at" in teaparty("jobs", "list", home=home).stdout
        term.send("\x03")
        assert term.wait() == 130, term.output
    listed = teaparty("jobs", "list", home=home).stdout
    assert "again at" not in listed
    assert f"job 1 is interrupted: nothing runs it; resume it with: teaparty run --repo {repo}" in (
        listed
    )
    [summary] = jobs_json("list", home=home)
    assert (summary["state"], summary["waiting"]) == ("interrupted", None)


def test_a_second_ctrl_c_while_the_first_is_handled_keeps_the_resume_line(
    repo: Path, tmp_path: Path
) -> None:
    """Ctrl-C at the prompt, and again while the run is still closing its store (held open
    by the launcher until the test has seen the second Ctrl-C reach the terminal): the run
    still ends 130 saying how to resume, without a traceback."""
    closing, go = tmp_path / "closing", tmp_path / "go"
    launcher = tmp_path / "launch.py"
    launcher.write_text(
        "import asyncio, pathlib\n"
        "import orchestrator.jobs.office as office\n"
        "close = office.Office.close\n"
        "async def held(self):\n"
        f"    pathlib.Path({str(closing)!r}).touch()\n"
        f"    while not pathlib.Path({str(go)!r}).exists():\n"
        "        await asyncio.sleep(0.01)\n"
        "    await close(self)\n"
        "office.Office.close = held\n"
        "from bot.cli import entry\n"
        "entry()\n"
    )
    argv = [sys.executable, str(launcher), "run", "--title", "Add docs", "--model", "scripted"]
    with Terminal([*argv, "--home", str(tmp_path / "home")], repo, ENV) as term:
        term.expect("your answer [yes/no]: ")
        term.send("\x03")
        term.until(closing.exists)
        term.send("\x03")
        term.until(lambda: term.output.count("^C") == 2)  # the terminal took it: SIGINT sent
        go.touch()
        code = term.wait()
    assert code == 130, term.output
    assert "Traceback" not in term.output
    assert f"Job 1 is saved; continue it with: teaparty run --repo {repo} --resume 1" in term.output
