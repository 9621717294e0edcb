"""What handlers gather facts through and perform their actions with: the App's dependencies.

`AppContext` holds them and does nothing of its own but reach GitHub as the installation a
delivery came through; perform.py carries out what a handler decided, each action by its
performer (performers.py, job_orders.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.errors import BotError
from bot.github.client import GitHubApp, Installation
from bot.handlers.payload_fields import Repo
from bot.handlers.repos import Repos
from bot.settings import Settings
from orchestrator.api import JobDriver, Office, Ports


@dataclass(frozen=True)
class AppContext:
    """The App's GitHub client, the Office, its ports and its job driver, and the
    repositories' cache."""

    settings: Settings
    github: GitHubApp
    office: Office
    ports: Ports
    driver: JobDriver
    repos: Repos

    async def installation(self, repo: Repo) -> Installation:
        """A client acting as the installation the delivery came through."""
        if repo.installation_id is None:
            raise BotError(f"{repo.full_name}: the delivery names no installation")
        return await self.github.installation(repo.installation_id)
