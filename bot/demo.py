"""`teaparty demo`: the whole App loop on this machine, with nothing to configure.

A local GitHub stand-in (bare repositories as remotes, request and response shapes checked
against GitHub's OpenAPI description) and `teaparty serve` run side by side on 127.0.0.1.
A maintainer opens an issue and labels it; the stand-in sends the signed `issues.labeled`
delivery GitHub would; the App plans, asks, works and opens a pull request, while the demo
prints the issue thread and the demo decider answers each question.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.fakehub.hub import FakeGitHub
from bot.github.tracking import MARKER_PREFIX
from bot.progress import Lines, View, view_for
from bot.serve import model_kind, models
from bot.server.runtime import Runtime, server
from bot.settings import Settings
from orchestrator.api import AgentDef, AssistantTurn, Model, ModelRequest, progress

OWNER, REPO, DECIDER, APP_ID = "octo", "demo", "maintainer", 1
TITLE = "Add a CHANGELOG"
BODY = (
    "We should keep a CHANGELOG.md so users can see what changed in each release.\n"
    "<!-- a hidden note: an HTML comment like this never reaches an agent -->"
)


def demo_command(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    """Run the demo; exit 0 when the pull request exists, 130 when interrupted.

    With `--home`, each run keeps its state in a new `run-N` folder there, so the demo can
    be run again on the same home; without, in a temporary folder removed after.
    """
    home = (
        _run_folder(Path(args.home))
        if args.home
        else Path(tempfile.mkdtemp(prefix="teaparty-demo-"))
    )
    if args.home:
        say(f"the demo's state: {home}")
    view = view_for(env, plain=args.plain)
    try:
        code = asyncio.run(run_demo(home, env, limit_s=args.timeout, view=view))
        if args.home:
            view.close()
            say(f"its job: teaparty jobs show 1 --home {shlex.quote(str(home / 'teaparty'))}")
        return code
    except KeyboardInterrupt:
        view.close()
        print("\ninterrupted: the demo stopped.", file=sys.stderr)
        return 130
    finally:
        view.close()
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)


def _run_folder(home: Path) -> Path:
    """A new `run-N` folder under `home` (made absolute once, here)."""
    home = home.expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    n = 1 + max((int(p.name[4:]) for p in home.glob("run-*") if p.name[4:].isdigit()), default=0)
    folder = home / f"run-{n}"
    folder.mkdir()
    return folder


async def run_demo(
    home: Path,
    env: Mapping[str, str],
    *,
    limit_s: float = 120.0,
    inspect: Callable[[FakeGitHub], None] = lambda hub: None,
    model_seconds: float = 0.0,
    view: View | None = None,
) -> int:
    """The demo in `home` (the stand-in's repositories and the App's state).

    `inspect` sees the stand-in at the end (the benchmark counts its API calls). With
    `model_seconds`, each model call takes that long on the App's clock (simulated: the
    clock jumps, nothing sleeps), as a slow model would. `view` shows the story and the
    job's progress (default: plain lines).
    """
    view = view or Lines()
    say = view.say
    pem = private_key_pem()
    port = free_port()
    secret = secrets.token_hex(16)
    hub = FakeGitHub(
        home / "github",
        app_id=APP_ID,
        private_key_pem=pem,
        webhook_url=f"http://127.0.0.1:{port}/webhook",
        webhook_secret=secret,
    )
    hub.add_repo(OWNER, REPO, source=_sample_repo(home / "sample"))
    hub.add_user(DECIDER, "admin")
    async with hub.serve() as api_url:
        settings = Settings(
            app_id=str(APP_ID),
            private_key=pem,
            webhook_secret=secret,
            home=home / "teaparty",
            api_url=api_url,
            server_url=hub.server_url,
            write_interval_s=0.0,
            status_interval_s=0.5,
        )
        quiet = {k: v for k, v in env.items() if not k.startswith("GITHUB_")}
        scripted = model_kind(None, quiet) == "scripted"  # it runs no shell: no sandbox needed
        clock = _Simulated()
        runtime = await Runtime.open(
            settings,
            models=_slowed(models(None, quiet), clock, model_seconds),
            env=quiet,
            scripted=scripted,
            clock=clock,
        )
        app_server = server(runtime.app, host="127.0.0.1", port=port, quiet=True)
        running = asyncio.create_task(runtime.run(app_server))
        try:
            async with asyncio.timeout(limit_s):
                while not app_server.started:
                    if running.done():
                        return 1
                    await asyncio.sleep(0.02)
                say(f"a GitHub stand-in at {api_url} · teaparty serve at http://127.0.0.1:{port}")
                await runtime.catchup.passed.wait()  # what it missed while down: nothing here
                code = await _story(hub, runtime, view)
                inspect(hub)
                return code
        except TimeoutError:
            say(f"the demo did not finish within {limit_s:.0f}s")
            return 1
        finally:
            app_server.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await runtime.close()


class _Simulated:
    """Real time plus whatever simulated model calls took."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


def _slowed(
    models: Callable[[AgentDef], Model], clock: _Simulated, seconds: float
) -> Callable[[AgentDef], Model]:
    if seconds <= 0:
        return models

    class Slow:
        def __init__(self, model: Model) -> None:
            self.model = model

        async def complete(self, request: ModelRequest) -> AssistantTurn:
            clock.offset += seconds
            return await self.model.complete(request)

    return lambda agent: Slow(models(agent))


async def _story(hub: FakeGitHub, runtime: Runtime, view: View) -> int:
    say = view.say
    number = hub.open_issue(OWNER, REPO, title=TITLE, body=BODY, author=DECIDER)
    watching = asyncio.create_task(_watch(runtime, view, f"github:{OWNER}/{REPO}#{number}"))
    try:
        return await _thread(hub, number, say)
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching


async def _watch(runtime: Runtime, view: View, key: str) -> None:
    """Show the job's progress, once it has a job, about twice a second."""
    while True:
        if (job := await runtime.ports.records.job_for_key(key)) is not None:
            view.update(await progress(runtime.office, job.job_id))
        await asyncio.sleep(0.5)


async def _thread(hub: FakeGitHub, number: int, say: Callable[[str], None]) -> int:
    """Label the issue, answer its questions, and print its thread until the pull request."""
    say(f"{OWNER}/{REPO}#{number} opened by @{DECIDER}: {TITLE!r}")
    delivery = await hub.label_issue(OWNER, REPO, number, "teaparty", sender=DECIDER)
    status = hub.deliveries[-1].status
    say(f"@{DECIDER} added the label `teaparty` → delivery {delivery[:8]}… answered {status}")
    thread = Thread(hub, number, say)
    while not hub.pulls(OWNER, REPO) or not thread.finished():
        for comment_id, author, body in thread.new():
            if MARKER_PREFIX + "gate:" in body:
                shown = re.search(r"`/approve ([0-9a-f]{7,40})`", body)
                reply = f"/approve {shown.group(1)}" if shown else "yes"  # pinned to what it saw
                await hub.comment_as(OWNER, REPO, number, DECIDER, reply)
                say(f"  @{DECIDER} (the demo decider) replied: {reply}")
            del comment_id, author
        await asyncio.sleep(0.05)
    thread.new()
    _show_pull(hub, say)
    await _show_check(hub, say)
    calls = [r for r in hub.requests if r.auth != "none"]
    say(f"GitHub API calls the App made: {len(calls)}; schema violations: {len(hub.violations)}")
    return 0 if not hub.violations else 1


class Thread:
    """Prints the issue's comments as they appear and as the tracking comment changes."""

    def __init__(self, hub: FakeGitHub, number: int, say: Callable[[str], None]) -> None:
        self.hub = hub
        self.say = say
        self.number = number
        self.seen: dict[int, str] = {}
        self.reacted = False

    def new(self) -> list[tuple[int, str, str]]:
        """Comments (id, author, body) first seen now; prints them and edits."""
        fresh = []
        if not self.reacted and self.hub.reactions(OWNER, REPO, self.number):
            self.reacted = True
            self.say("  👀 the App reacted to the issue")
        for comment in self.hub.comments(OWNER, REPO, self.number):
            known = self.seen.get(comment.comment_id)
            if known == comment.body:
                continue
            self.seen[comment.comment_id] = comment.body
            verb = "edited its tracking comment" if known is not None else "commented"
            if known is None:
                fresh.append((comment.comment_id, comment.author, comment.body))
            if comment.author != DECIDER:
                self.say(f"  [{comment.author}] {verb}: {_headline(comment.body)}")
                for line in comment.body.splitlines():
                    if line.startswith("> ") and MARKER_PREFIX + "gate:" in comment.body:
                        self.say(f"      {line}")
        return fresh

    def finished(self) -> bool:
        """Whether the tracking comment says the job is done (or stopped)."""
        return any(
            _headline(body).startswith(("✅", "⚠️"))
            for body in self.seen.values()
            if MARKER_PREFIX + "job:" in body
        )


def _headline(body: str) -> str:
    lines = [line for line in body.splitlines() if line and not line.startswith("<!--")]
    head = lines[0].lstrip("# ") if lines else ""
    now = next((line for line in lines if line.startswith("**Now:**")), "")
    return f"{head} — {now.removeprefix('**Now:** ')}" if now else head


async def _show_check(hub: FakeGitHub, say: Callable[[str], None], wait_s: float = 10.0) -> None:
    """The job's `TeaParty` check run on the pull request, once it says how the job ended
    (it is completed a moment after the tracking comment says done)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    runs = hub.app_check_runs(OWNER, REPO, check="TeaParty")
    while not (runs and runs[-1]["status"] == "completed") and loop.time() < deadline:
        await asyncio.sleep(0.05)
        runs = hub.app_check_runs(OWNER, REPO, check="TeaParty")
    if not runs:
        say("  no `TeaParty` check run on the pull request (see the log for why)")
        return
    run = runs[-1]
    said = run["conclusion"] or run["status"]
    say(f"  check run `TeaParty` on {str(run['head_sha'])[:7]}: {said} — {run['output']['title']}")


def _show_pull(hub: FakeGitHub, say: Callable[[str], None]) -> None:
    (pull, *_) = hub.pulls(OWNER, REPO)
    assert pull.pull is not None
    say(f"pull request #{pull.number}: {pull.title} ({pull.pull.head_ref} → {pull.pull.base_ref})")
    closes = [line for line in (pull.body or "").splitlines() if line.startswith("Closes #")]
    say(f"  {closes[0] if closes else '(no Closes line)'}")
    remote = hub.root / OWNER / f"{REPO}.git"
    stat = subprocess.run(
        [
            "git",
            "-C",
            str(remote),
            "diff",
            "--stat",
            f"{pull.pull.base_ref}...{pull.pull.head_ref}",
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    for line in stat.rstrip().splitlines():
        say(f"  {line.strip()}")


def say(line: str) -> None:
    """One line of the demo's story."""
    print(line, flush=True)


def private_key_pem() -> str:
    """A fresh RSA key, as a GitHub App's private key."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    ).decode()


def free_port() -> int:
    """A port on 127.0.0.1 nobody listens on now, below the kernel's ephemeral range.

    The port is used a moment later (the stand-in's webhook URL names it before the server
    binds it). One the kernel hands out for port 0 could meanwhile go to any socket bound to
    port 0 (the stand-in's own server, a client's connection) and the server would fail with
    "address already in use"; a port below that range is only ever taken by name.
    """
    low = _ephemeral_low()
    for _ in range(64):
        port = secrets.randbelow(low - _LOWEST) + _LOWEST
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # someone listens there: another
                continue
        return port
    with socket.socket() as sock:  # every one tried is taken: what the kernel gives
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


_LOWEST = 20_000  # above the ports services are usually configured on


def _ephemeral_low() -> int:
    """The lowest port the kernel gives for port 0 (Linux's setting; else IANA's 49152)."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 49_152
    return low if low > _LOWEST + 1_000 else 49_152


def _sample_repo(path: Path) -> Path:
    """A small project for the demo's issue to be about."""
    path.mkdir(parents=True)
    (path / "README.md").write_text("# demo\n\nA tiny project the TeaParty demo works on.\n")
    (path / "demo.py").write_text('def hello() -> str:\n    return "hello"\n')
    identity = ["-c", "user.name=Demo", "-c", "user.email=demo@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "."], [*identity, "commit", "-qm", "Start"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


if __name__ == "__main__":  # pragma: no cover
    sys.exit(demo_command(argparse.Namespace(home=None, timeout=120.0, plain=False), {}))
