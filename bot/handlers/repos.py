"""What handlers ask GitHub about a repository: its project file, and whether a sender may
write to it; each answer is kept a minute, so a burst of deliveries asks once.

Reading is I/O (`Repos`); making a `RepoConfig` of the text read is pure (`load_config`,
then `with_decider` for a repository without a project file). Its learnings are not asked
for: a job reads them from its own clone (`Office.prepare`).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from bot.github.client import Installation
from orchestrator.api import (
    GATE_KINDS,
    ConfigError,
    GateKinds,
    Organisation,
    Project,
    load_project,
    slug,
)

CACHE_TTL_S = 60.0
DEFAULT_LABEL = "teaparty"
PROJECT_FILE = ".teaparty/project.yaml"


@dataclass(frozen=True)
class RepoConfig:
    """A repository's project (or the error that keeps it from loading) and its text."""

    project: Project | None
    error: str | None
    text: str | None = None


def trigger_label(config: RepoConfig | None) -> str:
    """The label that starts a job: the project file's, else `teaparty`."""
    project = None if config is None else config.project
    return DEFAULT_LABEL if project is None else project.trigger_label


def project_name(owner: str, repo: str) -> str:
    """A repository's project name: unique per repository, usable in agent addresses."""
    return slug(f"{owner}-{repo}", limit=80)


def default_text(decider: str) -> str:
    """The project file of a repository that has none: the defaults, with this decider."""
    return f"humans: {{decider: {json.dumps(decider)}}}\n"


def load_config(
    text: str | None,
    *,
    owner: str,
    repo: str,
    org: Organisation,
    kinds: GateKinds = GATE_KINDS,
) -> RepoConfig:
    """The config the text read makes (against the engine's gate `kinds`); no project file
    makes neither a project nor an error."""
    if text is None:
        return RepoConfig(None, None)  # no file: the defaults, decided per job
    source = f"{owner}/{repo}:{PROJECT_FILE}"
    try:
        project = load_project(text, org=org, source=source, default_name="", kinds=kinds)
    except ConfigError as exc:
        return RepoConfig(None, str(exc))
    name = project_name(owner, repo)
    return RepoConfig(project.model_copy(update={"name": name}), None, text)


def with_decider(
    config: RepoConfig,
    requester: str,
    *,
    owner: str,
    repo: str,
    org: Organisation,
    kinds: GateKinds = GATE_KINDS,
) -> RepoConfig:
    """With no project file, the project runs on defaults and its decider is the requester."""
    if config.project is not None or config.error is not None:
        return config
    text = default_text(requester)
    name = project_name(owner, repo)
    project = load_project(text, org=org, source="(defaults)", default_name=name, kinds=kinds)
    return RepoConfig(project, None, text)


class Repos:
    """Project files and permissions as GitHub has them, each cached a minute."""

    def __init__(self, org: Organisation, kinds: GateKinds = GATE_KINDS) -> None:
        self.org = org
        self.kinds = kinds  # the gate kinds a project file may name (the engine's)
        self._permissions: dict[tuple[str, str], tuple[str, float]] = {}
        self._configs: dict[tuple[str, str], tuple[RepoConfig, float]] = {}

    async def permission(self, gh: Installation, owner: str, repo: str, login: str) -> str:
        """`admin`, `write`, `read` or `none`: the login's permission on the repository."""
        key = (f"{owner}/{repo}".lower(), login.lower())
        cached = self._permissions.get(key)
        if cached is not None and time.monotonic() - cached[1] < CACHE_TTL_S:
            return cached[0]
        permission = await gh.permission(owner, repo, login)
        self._permissions[key] = (permission, time.monotonic())
        return permission

    async def config(
        self, gh: Installation, owner: str, repo: str, *, branch: str, requester: str
    ) -> RepoConfig:
        """The repository's config on `branch`; `requester` decides where no file names one."""
        key = (f"{owner}/{repo}".lower(), branch)
        cached = self._configs.get(key)
        if cached is not None and time.monotonic() - cached[1] < CACHE_TTL_S:
            config = cached[0]
        else:
            text = await gh.file(owner, repo, PROJECT_FILE, ref=branch)
            config = load_config(text, owner=owner, repo=repo, org=self.org, kinds=self.kinds)
            self._configs[key] = (config, time.monotonic())
        return with_decider(
            config, requester, owner=owner, repo=repo, org=self.org, kinds=self.kinds
        )
