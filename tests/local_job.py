"""One local job on a real repository, driven as `teaparty run --yes` drives it, to its end.

The tests of a repository's own environment and checks (test_setup_job.py,
test_engine_checks.py) run their scripted organisation through it and read what the driver
showed and what it delivered.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from fakes import one_forge
from local_repo import ENV, git

from bot.local_forge import LocalForge
from orchestrator.config import load_organisation, load_project, shipped_org_dir
from orchestrator.core.model import Model
from orchestrator.core.secrecy import KnownSecrets
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.features import GATE_KINDS
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.model_choice import AGENT_IDENTITY
from orchestrator.jobs.office import JobSource, Office
from orchestrator.jobs.ports import Delivered, JobStatus
from orchestrator.sandbox.confine import Sandbox


class WatchedForge(LocalForge):
    """The terminal's forge, keeping every status the driver showed and delivered with."""

    statuses: list[JobStatus]
    delivered: list[JobStatus]

    async def show(self, status: JobStatus) -> None:
        """Keep the status, then print it as `teaparty run` does."""
        self.statuses.append(status)
        await super().show(status)

    async def deliver(self, status: JobStatus, job: JobHandle) -> Delivered:
        """Keep the status the pull request would be written from, then say it."""
        self.delivered.append(status)
        return await super().deliver(status, job)


@dataclass
class Ran:
    """What one job showed (`statuses`), delivered with (`delivered`) and printed; its id
    and branch."""

    statuses: list[JobStatus]
    delivered: list[JobStatus]
    lines: list[str] = field(default_factory=list)
    job_id: int = 0
    branch: str = ""


async def run_job(
    repo: Path,
    home: Path,
    sandbox: Sandbox,
    *,
    title: str,
    model: Model,
    env: Mapping[str, str] = ENV,
    setup_secrets: tuple[str, ...] = (),
    scripted: bool = False,
    repo_id: str = "local/calc",
) -> Ran:
    """One local job of `repo`'s project file (project `calc`), played by `model`
    (`scripted`: whose agents run no shell, so no sandbox is needed), as the repository
    `repo_id` (where the store keeps what is per repository, such as forgotten learnings)."""
    org = load_organisation(shipped_org_dir())
    text = git(repo, "show", "HEAD:.teaparty/project.yaml")
    project = load_project(
        text, org=org, source=".teaparty/project.yaml", default_name="calc", kinds=GATE_KINDS
    )
    office = await Office.open(
        home,
        sandbox=sandbox,
        org=org,
        projects=[project],
        models=lambda _: model,
        env={**env, **AGENT_IDENTITY},
        secrets=KnownSecrets.of(env, setup=setup_secrets),
        scripted=scripted,
    )
    lines: list[str] = []
    try:
        started = await office.start_job(
            project=project.name,
            key=f"local:{repo}:{title}",
            title=title,
            brief=f"Job for repository calc (project {project.name}): {title}\n\n<issue>\n"
            f"{title}, as the tests say.\n</issue>\nHand it to the project's lead.",
            source=JobSource(
                repo=repo_id,
                source=str(repo),
                start=git(repo, "rev-parse", "HEAD").strip(),
                branch=lambda job_id: f"teaparty/job-{job_id}-calc",
                slug="calc",
            ),
            project_text=text,
        )
        job_id = started.job_id
        branch = (await office.prepare(job_id)).branch
        forge = WatchedForge(
            office, repo, decider="dev", approve=None, say=lines.append, auto="yes"
        )
        forge.statuses, forge.delivered = [], []

        driver = JobDriver(office, one_forge(forge))
        for _ in range(20):  # a bound on syncs, not on time: each runs the job until idle
            if (state := await driver.sync(job_id)) == "done":
                break
            assert state != "failed", "\n".join(lines)
            await office.run_until_idle(job_id)
        else:
            pytest.fail("the job did not end:\n" + "\n".join(lines))
        return Ran(forge.statuses, forge.delivered, lines, job_id, branch)
    finally:
        await office.close()
