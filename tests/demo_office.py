"""The shape most engine tests begin with: an office of the shipped organisation over one
project, "widgets", whose agents a scripted model plays, and a job started on a local
repository (its source), as `teaparty run` starts one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fakes import one_forge

from orchestrator.api import Model, Office, load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.secrecy import SecretValues
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.office import JobSource
from orchestrator.jobs.ports import Forge, JobState
from orchestrator.sandbox.confine import Sandbox

NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
HAND_OFF = "Hand it to the project's lead."
TO_LEAD = "Hand it to the lead."


def local_source(
    source: Path | str,
    slug: str,
    *,
    repo: str = "widgets",
    start: str = "refs/remotes/origin/main",
) -> JobSource:
    """Where a job's repository comes from: the one at `source`, mirrored as `repo`; the job
    branch `teaparty/job-{id}-{slug}` starts at `start` (by default origin's main)."""
    return JobSource(
        repo=repo,
        source=str(source),
        start=start,
        branch=lambda job_id: f"teaparty/job-{job_id}-{slug}",
        slug=slug,
    )


async def open_office(
    home: Path,
    project_text: str,
    model: Model,
    *,
    secrets: SecretValues | None = None,
    sandbox: Sandbox = NOWHERE,
    name: str = "widgets",
) -> Office:
    """The office under `home`: project `name` configured by `project_text`, every agent
    played by `model`, holding `secrets`; `sandbox` by default none (the scripted model runs
    no shell)."""
    org = load_organisation(shipped_org_dir())
    return await Office.open(
        home,
        org=org,
        projects=[load_project(project_text, org=org, source="p", default_name=name)],
        models=lambda _: model,
        env={},
        sandbox=sandbox,
        scripted=True,
        secrets=secrets,
    )


def office_fixture(opening: Callable[[Path], Awaitable[Office]]) -> Any:
    """A pytest fixture `office`: the office `opening(tmp_path / "home")` opens, closed after
    the test (assign it as `office = office_fixture(open_office)` in a test module)."""

    @pytest.fixture
    async def office(tmp_path: Path) -> AsyncIterator[Office]:
        async with closed_after(opening(tmp_path / "home")) as opened:
            yield opened

    return office


@asynccontextmanager
async def closed_after(opening: Awaitable[Office]) -> AsyncIterator[Office]:
    """The office `opening` opens, closed when the caller is done with it."""
    office = await opening
    try:
        yield office
    finally:
        await office.close()


async def start_job(
    office: Office,
    source: Path,
    project_text: str,
    *,
    title: str,
    body: str,
    number: int = 1,
    slug: str = "changelog",
    hand_off: str = HAND_OFF,
) -> int:
    """Start job `local:widgets#{number}` on the repository at `source` (its main branch);
    its id. The brief is the issue's `title` and `body`, then `hand_off`."""
    started = await office.start_job(
        project="widgets",
        key=f"local:widgets#{number}",
        title=title,
        brief=f"Job: {title}\n\n<issue>{body}</issue>\n{hand_off}".rstrip(),
        source=local_source(source, slug),
        project_text=project_text,
    )
    return started.job_id


async def drive(
    office: Office,
    forge: Forge,
    job_id: int,
    *,
    after_sync: Callable[[], Awaitable[None]] | None = None,
) -> JobState:
    """What `teaparty run` does: sync, run, until the job is done or failed."""

    driver = JobDriver(office, one_forge(forge))
    while (state := await driver.sync(job_id)) not in ("done", "failed"):
        if after_sync is not None:
            await after_sync()
        await office.run_until_idle()
    return state
