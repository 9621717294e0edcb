"""`teaparty serve` assembled: webhook server, delivery worker, engine and job driver in one loop.

On start the engine's store says what was under way: each active job the App started gets
its project and workspace back before the scheduler resumes its conversations, and every
pending delivery is worked off; GitHub is asked again for the deliveries that never arrived
while the App was down (bot/server/catchup.py), then every ten minutes. Engine events (a
turn, a gate, a reply) and a periodic sweep sync the jobs they touch, so GitHub shows what
the store holds. Commands other processes leave in the store (`teaparty jobs cancel`) are
carried out as they come.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI

from bot.errors import BotError
from bot.github.client import Clock, GitHubApp, Sleep
from bot.handlers.ci import watch_started
from bot.handlers.payloads import HANDLED_EVENTS
from bot.handlers.service import GitHubService
from bot.server.backfill import Backfill
from bot.server.catchup import CatchUp
from bot.server.endpoint import create_app
from bot.server.supervisor import Supervisor
from bot.server.worker import DeliveryWorker
from bot.settings import Settings
from orchestrator.api import (
    AGENT_IDENTITY,
    FEATURES,
    AgentDef,
    ConfigError,
    Event,
    GateAnswered,
    GateAsked,
    JobStarted,
    KnownSecrets,
    Model,
    Office,
    Ports,
    Register,
    Sandbox,
    StateChanged,
    UsageRecorded,
    announce,
    load_organisation,
    probe,
    serve_commands,
    shipped_org_dir,
)

log = logging.getLogger(__name__)


@dataclass
class Runtime:
    """Everything one `teaparty serve` process runs."""

    settings: Settings
    office: Office
    ports: Ports
    github: GitHubApp
    service: GitHubService
    worker: DeliveryWorker
    app: FastAPI
    supervisor: Supervisor
    catchup: CatchUp

    @classmethod
    async def open(
        cls,
        settings: Settings,
        *,
        models: Callable[[AgentDef], Model],
        env: Mapping[str, str],
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Sleep = asyncio.sleep,
        clock: Clock = time.time,
        scripted: bool = False,
        sandbox: Sandbox | None = None,
        github: GitHubApp | None = None,
        features: Sequence[Register] = FEATURES,
        secrets: KnownSecrets | None = None,
    ) -> Runtime:
        """Open the store under the settings' home and wire the App around it.

        `sandbox` is how agents are confined; by default, what this host gives (`probe`).
        `github` is the client (runner mode passes its token's); by default, the App's.
        `features` are what the engine runs with (the standard ones by default).
        `sleep` and `clock` are how GitHub's waits are waited out (tests inject both).
        `secrets` are the secret values the engine holds (by default, those of `env` and
        the settings' setup secrets); the App's key, its webhook secret and each
        installation token minted are added.
        """
        org = load_organisation(settings.config_dir or shipped_org_dir())
        key_file = env.get("GITHUB_APP_PRIVATE_KEY_PATH")
        hidden = [Path(key_file)] if key_file else []
        sandbox = sandbox or await probe(env, home=settings.home, hidden=hidden)
        announce(sandbox)
        known = secrets or KnownSecrets.of(env, setup=settings.setup_secrets)
        known.add(settings.private_key, "GITHUB_APP_PRIVATE_KEY")
        known.add(settings.webhook_secret, "GITHUB_WEBHOOK_SECRET")
        office = await Office.open(
            settings.home,
            org=org,
            projects=[],
            models=models,
            env={**env, **AGENT_IDENTITY},
            sandbox=sandbox,
            scripted=scripted,
            features=features,
            secrets=known,
        )
        github = github or GitHubApp(
            app_id=settings.app_id,
            private_key=settings.private_key,
            api_url=settings.api_url,
            transport=transport,
            sleep=sleep,
            clock=clock,
            write_interval_s=settings.write_interval_s,
        )
        github.minted = lambda token: known.add(token, "an installation token")
        service = GitHubService(settings, office, github, clock=clock)
        ports = service.ports
        runtime: Runtime
        worker = DeliveryWorker(ports.deliveries, service.handle, on_job=lambda j: runtime.kick(j))
        supervisor = Supervisor()
        app = create_app(
            ports.deliveries,
            secret=None if settings.insecure_no_signature else settings.webhook_secret,
            events=HANDLED_EVENTS,
            on_stored=worker.wake,
            workers=lambda: supervisor.health,
        )
        backfill = Backfill(
            github,
            office,
            ports,
            service.context.repos,
            on_stored=worker.wake,
            clock=clock,
        )
        catchup = CatchUp(
            github, ports.deliveries, events=HANDLED_EVENTS, clock=clock, backfill=backfill
        )
        runtime = cls(settings, office, ports, github, service, worker, app, supervisor, catchup)
        return runtime

    def __post_init__(self) -> None:
        self._syncing: dict[int, asyncio.Task[None]] = {}
        self._server: uvicorn.Server | None = None  # while `run` serves it
        self._again: set[int] = set()
        self._held = False
        self._job_of: dict[str, int] = {}
        self.office.subscribe(self._on_event)

    def kick(self, job_id: int) -> None:
        """Sync a job soon; a sync under way runs once more after it ends. Not while a
        runner drives its jobs itself (`hold_syncs`): one sync of a job at a time."""
        if self._held:
            return
        if job_id in self._syncing:
            self._again.add(job_id)
            return
        task = asyncio.get_running_loop().create_task(self._sync(job_id))
        self._syncing[job_id] = task

    async def _sync(self, job_id: int) -> None:
        try:
            while True:
                self._again.discard(job_id)
                try:
                    await self.service.driver.sync(job_id)
                except Exception as exc:  # the job runner's guard: one sync must not stop the App
                    if self._server is not None and self._server.should_exit:  # shutting down
                        log.warning("job %d: sync cut short by the shutdown: %s", job_id, exc)
                        return
                    log.exception("job %d: sync failed; the next event or sweep retries it", job_id)
                if job_id not in self._again:
                    return
        finally:
            self._syncing.pop(job_id, None)

    def hold_syncs(self) -> None:
        """From now on, events start no sync: the caller syncs the jobs (runner mode)."""
        self._held = True

    async def _on_event(self, event: Event) -> None:
        if isinstance(event, JobStarted):
            self.kick(event.job_id)
            return
        # An answer to an engine gate (a protected-path approval) may wake no conversation:
        # the job's sync acts on it.
        if isinstance(event, GateAsked | GateAnswered | StateChanged | UsageRecorded):
            job_id = await self._job(event.conversation_id)
            if job_id is not None:
                self.kick(job_id)

    async def _job(self, conversation_id: str) -> int | None:
        if conversation_id not in self._job_of:
            job_id = await self.ports.records.job_of_conversation(conversation_id)
            if job_id is None:
                return None
            self._job_of[conversation_id] = job_id
        return self._job_of[conversation_id]

    async def resume(self) -> list[int]:
        """Give each active job its project and worktree back; the App's jobs among them."""
        resumed = await self.office.resume()
        for job_id in resumed.without_project:  # stored by an older version
            try:
                await self.service.restore_project(job_id)
            except ConfigError as exc:  # one job's project no longer loads: the rest go on
                log.error("job %d not resumed: %s", job_id, exc)
        return await self._active()

    async def _sweep(self) -> None:
        while True:
            await asyncio.sleep(self.settings.status_interval_s)
            for job_id in await self._active():
                self.kick(job_id)
            await self._watch_ci()

    async def _watch_ci(self) -> None:
        """Resting jobs with an open pull request: say where no CI started on the head, and
        decide on checks that completed on it while it was a draft (bot/handlers/ci.py)."""
        for job_id in await self.ports.reviews.resting_with_open_pull():
            try:
                await watch_started(
                    self.service.context,
                    job_id,
                    now=self.service.clock(),
                    wait_s=self.settings.ci_start_s,
                )
            except BotError as exc:  # GitHub answered otherwise: the next sweep looks again
                log.warning("job %d: CI not looked for: %s", job_id, exc)

    async def _active(self) -> list[int]:
        return [job.job_id for job in await self.ports.records.linked("github")]

    async def run(self, server: uvicorn.Server | None = None) -> None:
        """Resume, then serve until the server stops (or forever without one).

        The scheduler, the delivery worker and the sweep run under the supervisor: one that
        dies is restarted, and given up on (`/healthz` 503) after repeated failures.
        """
        self._server = server
        for job_id in await self.resume():
            self.kick(job_id)
        self.supervisor.add("scheduler", self.office.serve)
        self.supervisor.add("deliveries", self.worker.run)
        self.supervisor.add("sweep", self._sweep)
        self.supervisor.add("catch-up", self.catchup.run)
        self.supervisor.add("commands", lambda: serve_commands(self.office))
        supervised = asyncio.create_task(self.supervisor.run(), name="supervisor")
        try:
            if server is None:
                await supervised
            else:
                await server.serve()
        finally:
            await _stop([supervised, *self._syncing.values()])

    async def close(self) -> None:
        """Close the engine's store."""
        await self.github.aclose()
        await self.office.close()


def server(app: FastAPI, *, host: str, port: int, quiet: bool = False) -> uvicorn.Server:
    """A uvicorn server for the App (uvloop and httptools when installed)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        lifespan="off",
        log_level="warning" if quiet else "info",
        access_log=False,  # one line per delivery comes from the worker instead
    )
    return uvicorn.Server(config)


async def _stop(tasks: list[asyncio.Task[None]]) -> None:
    """Cancel background tasks and wait for them; an error one ended with is logged."""
    for task in tasks:
        task.cancel()
    for task, outcome in zip(
        tasks, await asyncio.gather(*tasks, return_exceptions=True), strict=True
    ):
        if isinstance(outcome, Exception):
            log.error("background task %s ended with %r at shutdown", task.get_name(), outcome)
