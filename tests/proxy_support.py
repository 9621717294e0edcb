"""Jobs on a real repository and a real store, each with one gate, for the proxy's tests.

The organisation is the shipped one on the demo model, except the proxy, whose model the
test gives. The project lets the proxy answer `plan` gates (the demo's one gate per job)
when it has earned it, and names carol its decider.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from demo_office import drive, local_source
from fakes import FakeForge
from local_repo import make_repo

from orchestrator.api import load_project
from orchestrator.config import AgentDef, load_organisation, shipped_org_dir
from orchestrator.core.model import Model
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

TITLE = "Add a changelog"
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
EARNING = "humans: {decider: carol}\ngates: {plan: when_unsure}\n"
SEED = "proxy-test"  # gates 1 to 9 are none of them audited under this seed
AUDITS_GATE_6 = "h"  # gate 6 is in the audit sample under this seed
SURE = "answer: yes\nconfidence: 0.93\nreasons: carol approved each of the last plans."


async def open_office(home: Path, proxy: Model, *, project: str = EARNING) -> Office:
    org = load_organisation(shipped_org_dir())
    loaded = load_project(project, org=org, source="p", default_name="widgets")
    demo = DemoModel(title=TITLE, body="We need one.", path="docs/requests/changelog.md")

    def models(agent: AgentDef) -> Model:
        return proxy if agent.name == org.proxy.name else demo

    office = await Office.open(
        home,
        org=org,
        projects=[loaded],
        models=models,
        env={},
        sandbox=NOWHERE,
        scripted=True,
    )
    await office.proxy.use_seed(SEED)
    return office


@asynccontextmanager
async def widgets(
    tmp_path: Path, proxy: Model, *, project: str = EARNING
) -> AsyncIterator[tuple[Office, Path]]:
    """`open_office` under `tmp_path`/home, and the repository `widgets` its jobs work on
    (`tmp_path`/widgets); the office is closed after."""
    repo = make_repo(tmp_path / "widgets")
    office = await open_office(tmp_path / "home", proxy, project=project)
    try:
        yield office, repo
    finally:
        await office.close()


async def start(office: Office, repo: Path, n: int, *, project: str = EARNING) -> int:
    started = await office.start_job(
        project="widgets",
        key=f"local:widgets#{n}",
        title=TITLE,
        brief=f"Job: {TITLE}\n\n<issue>We need one.</issue>\nHand it to the project's lead.",
        source=local_source(repo, "changelog"),
        project_text=project,
    )
    return started.job_id


async def run_jobs(office: Office, forge: FakeForge, repo: Path, numbers: range) -> list[int]:
    """Run one job per number to its end, each answered `yes` by the decider if asked."""
    jobs = []
    for n in numbers:
        job_id = await start(office, repo, n)
        assert await drive(office, forge, job_id) == "done"
        jobs.append(job_id)
    return jobs
