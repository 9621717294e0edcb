"""Jobs for tests of managing them: an Office on the scripted organisation, jobs started in
it from a real repository, and a forge that leaves every question open (a parked job)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from demo_office import local_source
from fakes import FakeForge, one_forge

from orchestrator.api import load_project
from orchestrator.config import AgentDef, load_organisation, shipped_org_dir
from orchestrator.core.model import Model
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge, JobState
from orchestrator.sandbox.confine import Sandbox
from orchestrator.workspace.git import slug

NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
PROJECT = "humans: {decider: carol}\n"


async def open_office(home: Path, models: Callable[[AgentDef], Model] | None = None) -> Office:
    """An Office over `home` serving project widgets, the demo model playing every role."""
    org = load_organisation(shipped_org_dir())
    project = load_project(PROJECT, org=org, source="p", default_name="widgets")
    demo = DemoModel()
    return await Office.open(
        home,
        org=org,
        projects=[project],
        models=models or (lambda _: demo),
        env={},
        sandbox=NOWHERE,
        scripted=True,
    )


async def start(office: Office, repo: Path, title: str, *, key: str | None = None) -> int:
    """Start a job on `repo` (key: a local one), its workspace made; its id."""
    started = await office.start_here(
        project="widgets",
        key=key or f"local:{repo}:{slug(title)}",
        title=title,
        brief=f"Job: {title}\n\n<issue>\n{title}, please.\n</issue>\nHand it to the lead.",
        source=local_source(repo, slug(title)),
        project_text=PROJECT,
    )
    return started.job_id


class Parking(FakeForge):
    """A forge nobody answers at: each question stays open, the job parked at it."""

    async def ask(self, status: Any, gate: Any, *, suggestion: Any = None) -> None:
        self.asked.append(gate.gate_id)


async def drive(office: Office, forge: Forge, job_id: int) -> JobState:
    """Sync and run the job until it is done, failed, cancelled or waits at a question."""
    driver = JobDriver(office, one_forge(forge))
    while (state := await driver.sync(job_id)) not in ("done", "failed", "cancelled", "waiting"):
        await office.run_until_idle(job_id)
    return state
