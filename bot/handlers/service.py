"""The App at work: stored deliveries handed to their handlers, and jobs given their Forge.

`GitHubApp` (the REST adapter) and `Office` (the engine) meet here. A delivery is parsed
into a command and dispatched to the handler of its event and action (`router`); the
`JobDriver` keeps each job's tracking comment, gate comments, branch and pull request in
line with the store, through the `GitHubForge` of the issue the job serves.
"""

from __future__ import annotations

import json
import logging
import time

from bot.errors import BotError
from bot.github.client import Clock, GitHubApp
from bot.github.forge import GitHubForge
from bot.github.subject import Subject
from bot.handlers.actions import Outcome
from bot.handlers.app_context import AppContext
from bot.handlers.payloads import parse_command
from bot.handlers.repos import Repos, default_text
from bot.handlers.router import dispatch
from bot.settings import Settings
from orchestrator.api import ConfigError, ConfigIssue, Delivery, Forge, JobDriver, Office, Ports

log = logging.getLogger(__name__)


class GitHubService:
    """Acts on deliveries for one App installation set, over one Office."""

    def __init__(
        self, settings: Settings, office: Office, github: GitHubApp, *, clock: Clock = time.time
    ) -> None:
        self.settings = settings
        self.office = office
        self.github = github
        self.clock = clock
        self.ports = Ports.of(office)
        self.driver = JobDriver(office, self.forge, clock=clock)
        self.context = AppContext(
            settings,
            github,
            office,
            self.ports,
            self.driver,
            Repos(office.org, self.ports.gate_kinds),
        )

    async def forge(self, job_id: int) -> Forge | None:
        """The Forge of a job the App started, or None for any other job."""
        subject = await self.ports.records.subject(job_id, "github")
        if subject is None:
            return None
        return GitHubForge(
            self.github,
            self.ports.objects,
            Subject.from_json(subject),
            kinds=self.ports.gate_kinds,
            server_url=self.settings.server_url,
            progress_interval_s=self.settings.progress_interval_s,
            clock=self.clock,
            identity=await self.github.identity(),
            pages_url=self.settings.public_url,
            notes=self.ports.ci,
        )

    async def handle(self, delivery: Delivery) -> Outcome:
        """Act on one stored delivery; what came of it, and the job it touched."""
        command = parse_command(
            delivery.event,
            json.loads(delivery.body),
            app_login=await self.github.login(),
            allowed_bots=self.settings.allowed_bots,
        )
        return await dispatch(command, self.context)

    async def restore_project(self, job_id: int) -> None:
        """A job from before jobs kept their project file: read it again from its repository.

        Its subject may hold the text; otherwise the repository's default branch has it now
        (the defaults, with the job's decider, when GitHub cannot be asked).
        """
        linked = await self.ports.records.subject(job_id, "github")
        if linked is None:
            raise ConfigError((ConfigIssue(f"job {job_id}", None, "", "no project stored"),))
        s = Subject.from_json(linked)
        text = s.project_yaml
        if text is None:
            try:
                gh = await self.github.installation(s.installation_id)
                config = await self.context.repos.config(
                    gh, s.owner, s.repo, branch=s.default_branch, requester=s.decider
                )
                text = config.text
            except BotError as exc:
                log.warning("job %d: project file not read again (%s); the defaults", job_id, exc)
        await self.office.restore_project(job_id, text or default_text(s.decider))
