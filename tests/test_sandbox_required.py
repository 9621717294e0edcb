"""Where agents' shells cannot be confined, jobs whose agents have a shell do not start."""

from __future__ import annotations

from pathlib import Path

import pytest
import teams_script as script

from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.errors import SandboxError
from orchestrator.jobs.office import Office
from orchestrator.sandbox.confine import Sandbox

NOWHERE = Sandbox("unavailable", "bwrap: no user namespaces; landlock: kernel too old")


async def open_office(home: Path, *, scripted: bool) -> Office:
    org = load_organisation(shipped_org_dir())
    project = load_project(script.PROJECT, org=org, source="p.yaml", default_name="widgets")
    return await Office.open(
        home,
        org=org,
        projects=[project],
        models=lambda _: script.model(),
        env=script.ENV,
        sandbox=NOWHERE,
        scripted=scripted,
    )


async def test_a_job_with_shells_fails_to_start_naming_the_cause(tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home", scripted=False)
    try:
        with pytest.raises(SandboxError, match="no user namespaces; landlock: kernel too old"):
            await script.start(office, script.make_repo(tmp_path / "widgets"))
        jobs = await office.engine.store.read(
            lambda tx: tx.execute("SELECT count(*) FROM jobs").fetchone()
        )
        assert jobs == (0,)
    finally:
        await office.close()


async def test_the_scripted_stand_in_needs_no_sandbox(tmp_path: Path) -> None:
    office = await open_office(tmp_path / "home", scripted=True)
    try:
        job = await script.start(office, script.make_repo(tmp_path / "widgets"))
        assert job.created
    finally:
        await office.close()


def test_a_shell_call_without_a_sandbox_is_a_tool_error_not_a_crash() -> None:
    with pytest.raises(SandboxError, match="TEAPARTY_SANDBOX=off to run them unconfined"):
        NOWHERE.require()
