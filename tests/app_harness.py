"""A real `teaparty serve` process against the local GitHub stand-in, for end-to-end tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import httpx

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub
from bot.fakehub.state import DEFAULT_APP_PERMISSIONS
from bot.github.client import GitHubApp, Identity
from bot.github.forge import GitHubForge
from bot.github.subject import Subject
from bot.github.tracking import MARKER_PREFIX
from bot.server.runtime import Runtime, server
from bot.settings import Settings
from orchestrator.api import FEATURES, AgentDef, Model, Office, Register, Sandbox, models

SECRET = "e2e-webhook-secret"
APP_ID = 4242
OWNER, REPO = "octo", "widgets"
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")


def office_forge(
    github: GitHubApp, office: Office, subject: Subject, *, identity: Identity, **options: Any
) -> GitHubForge:
    """The GitHubForge of `subject` on the stand-in, over `office`'s records and gate kinds
    (as the App's service makes one)."""
    return GitHubForge(
        github,
        office.records,
        subject,
        kinds=office.gate_kinds,
        server_url="http://hub",
        identity=identity,
        **options,
    )


def make_hub(
    root: Path, *, port: int, pem: str, clock: Callable[[], float] = time.time, **options: Any
) -> FakeGitHub:
    """The stand-in with octo/widgets, delivering webhooks to a server on `port` (`options`:
    more of FakeGitHub's, such as the App's `permissions`)."""
    hub = FakeGitHub(
        root,
        app_id=APP_ID,
        private_key_pem=pem,
        webhook_url=f"http://127.0.0.1:{port}/webhook",
        webhook_secret=SECRET,
        clock=clock,
        **options,
    )
    hub.add_repo(OWNER, REPO)
    return hub


def declined(*names: str) -> dict[str, str]:
    """What an installer granted who declined `names` of what the App's manifest asks for."""
    assert set(names) <= set(DEFAULT_APP_PERMISSIONS), names
    return {k: v for k, v in DEFAULT_APP_PERMISSIONS.items() if k not in names}


def world(
    tmp_path: Path, permissions: Mapping[str, str] = DEFAULT_APP_PERMISSIONS
) -> tuple[FakeGitHub, int, str]:
    """The stand-in (alice is an admin of octo/widgets), a free port and the App's key; the
    installation granted `permissions`."""
    pem, port = private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem, permissions=permissions)
    hub.add_user("alice", "admin")
    return hub, port, pem


def bodies(hub: FakeGitHub, number: int, kind: str, repo: str = REPO) -> list[str]:
    """The bodies of the App's comments of one kind (`job:`, `gate:`, ...) on an issue."""
    return [c.body for c in hub.comments(OWNER, repo, number) if MARKER_PREFIX + kind in c.body]


async def ask_plan(hub: FakeGitHub, number: int, *, decider: str = "alice") -> None:
    """Label issue `number` for the App (as `decider`) and wait for its plan question."""
    await hub.label_issue(OWNER, REPO, number, "teaparty", sender=decider)
    await until(lambda: bodies(hub, number, "gate:"), what="the plan question")


async def approve_plan(hub: FakeGitHub, number: int, *, decider: str = "alice") -> None:
    """Label issue `number`, wait for the plan question and answer it yes (as `decider`)."""
    await ask_plan(hub, number, decider=decider)
    await hub.comment_as(OWNER, REPO, number, decider, "yes")


async def protected_question(hub: FakeGitHub, number: int) -> tuple[str, str]:
    """Wait for the second gate question on issue `number` (the protected-path one, after
    the plan's): its body and the short hash `/approve` takes."""
    await until(
        lambda: len(bodies(hub, number, "gate:")) == 2,
        what="the protected-path question",
        limit=90,
    )
    asked = bodies(hub, number, "gate:")[1]
    found = re.search(r"`protected-path ([0-9a-f]{7})`", asked)
    assert found is not None, asked
    return asked, found.group(1)


class OffsetClock:
    """Real time plus an offset a test moves forward."""

    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        return time.time() + self.offset


@dataclass
class Server:
    """A running `teaparty serve`."""

    process: asyncio.subprocess.Process
    url: str
    log: Path
    env: dict[str, str]

    async def pending(self) -> int:
        """Deliveries the server has stored and not yet handled."""
        async with httpx.AsyncClient() as http:
            return int((await http.get(self.url + "/healthz")).json()["pending_deliveries"])

    def output(self) -> str:
        """What the server logged."""
        return self.log.read_text(errors="replace")


def server_env(hub: FakeGitHub, api_url: str, home: Path, pem: str) -> dict[str, str]:
    """The environment a real deployment would set, pointed at the stand-in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    return env | {
        "GITHUB_APP_ID": str(APP_ID),
        "GITHUB_APP_PRIVATE_KEY": pem,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": hub.server_url,
        "TEAPARTY_HOME": str(home),
        "TEAPARTY_GITHUB_WRITE_INTERVAL": "0",
        "TEAPARTY_STATUS_INTERVAL": "0.5",
    }


async def serve_process(
    env: dict[str, str], *, port: int, out: int | IO[bytes]
) -> asyncio.subprocess.Process:
    """`teaparty serve` on `port`, started with `env`, writing all it says to `out`."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "serve",
        "--port",
        str(port),
        env=env,
        stdout=out,
        stderr=asyncio.subprocess.STDOUT,
    )


@asynccontextmanager
async def serve(env: dict[str, str], *, port: int, log: Path) -> AsyncIterator[Server]:
    """Start `teaparty serve` and wait until it answers /healthz; SIGTERM it after."""
    with log.open("ab") as out:
        process = await serve_process(env, port=port, out=out)
    server = Server(process, f"http://127.0.0.1:{port}", log, env)
    try:
        await until(lambda: _healthy(server), what="the server to answer /healthz")
        yield server
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), 20)
            except TimeoutError:
                process.kill()
                await process.wait()


def writer_and_reader(hub: FakeGitHub) -> None:
    """alice may write to octo/widgets (and decides), mallory may only read it."""
    hub.add_user("alice", "maintain")
    hub.add_user("mallory", "read")


@dataclass
class Served:
    """The stand-in serving its API and a `teaparty serve` on `port` pointed at it."""

    hub: FakeGitHub
    server: Server
    pem: str
    port: int


@asynccontextmanager
async def served(
    tmp_path: Path,
    *,
    pem: str | None = None,
    prepare: Callable[[FakeGitHub], None] | None = None,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> AsyncIterator[Served]:
    """A fresh stand-in (made with make_hub's `options`, then made ready by `prepare`) and
    `teaparty serve` over it (`env` added to its environment), their files under
    `tmp_path`; both stopped after, and every request the stand-in answered checked against
    GitHub's description."""
    pem, port = pem or private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem, **options)
    if prepare is not None:
        prepare(hub)
    async with hub.serve() as api_url:
        more = server_env(hub, api_url, tmp_path / "home", pem) | dict(env or {})
        async with serve(more, port=port, log=tmp_path / "server.log") as server:
            yield Served(hub, server, pem, port)
    assert hub.violations == [], hub.violations


@asynccontextmanager
async def unserved(
    tmp_path: Path, *, prepare: Callable[[FakeGitHub], None] | None = None
) -> AsyncIterator[tuple[FakeGitHub, Runtime, str, str]]:
    """A fresh stand-in (made ready by `prepare`) whose webhooks go nowhere (nothing listens
    on their port), and the App's runtime over it with the scripted models, not serving: a
    test hands it deliveries itself. (hub, runtime, the stand-in's API URL, the App's key);
    the runtime is closed after, once every sync it started has ended."""
    pem = private_key_pem()
    hub = make_hub(tmp_path / "hub", port=free_port(), pem=pem)
    if prepare is not None:
        prepare(hub)
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem)
        runtime = await Runtime.open(
            settings, models=models("scripted", {}), env={}, scripted=True, sandbox=NOWHERE
        )
        try:
            yield hub, runtime, api_url, pem
        finally:
            await until(lambda: not runtime._syncing, what="the App's syncs to end")
            await runtime.close()


async def _healthy(server: Server) -> bool:
    if server.process.returncode is not None:
        raise AssertionError(f"teaparty serve exited:\n{server.output()}")
    try:
        await server.pending()
    except httpx.HTTPError:
        return False
    return True


async def until(
    check: Callable[[], object], *, what: str, limit: float = 60.0, every: float = 0.05
) -> None:
    """Wait for `check()` (sync or async) to be truthy, at most `limit` seconds."""
    deadline = asyncio.get_running_loop().time() + limit
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


def app_settings(hub: FakeGitHub, api_url: str, home: Path, pem: str, **more: Any) -> Settings:
    """The App's settings for an in-process runtime against the stand-in."""
    return Settings(
        app_id=str(APP_ID),
        private_key=pem,
        webhook_secret=SECRET,
        home=home,
        api_url=api_url,
        server_url=hub.server_url,
        write_interval_s=0.0,
        **more,
    )


@asynccontextmanager
async def in_process(
    settings: Settings,
    models: Callable[[AgentDef], Model],
    *,
    port: int,
    sandbox: Sandbox,
    scripted: bool = True,
    clock: Callable[[], float] = time.time,
    features: Sequence[Register] = FEATURES,
) -> AsyncIterator[Runtime]:
    """`teaparty serve`'s runtime in this process, serving webhooks on `port`, running the
    engine with `features` (the standard ones by default); closed after."""
    runtime = await Runtime.open(
        settings,
        models=models,
        env={},
        scripted=scripted,
        sandbox=sandbox,
        clock=clock,
        features=features,
    )
    app = server(runtime.app, host="127.0.0.1", port=port, quiet=True)
    running = asyncio.create_task(runtime.run(app))
    try:
        await until(lambda: app.started, what="the server to start")
        yield runtime
    finally:
        app.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await runtime.close()
