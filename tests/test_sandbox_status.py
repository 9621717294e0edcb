"""The tracking comment says how the job's agents are confined, loudly when they are not."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import teams_script as script

from bot.github.outbound import Outbound
from bot.github.tracking import tracking_body
from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.messages import Usage
from orchestrator.jobs.office import Office
from orchestrator.jobs.ports import JobStatus
from orchestrator.sandbox.confine import Sandbox

AGENT = Outbound("o", "r", 5, "https://github.com")


def status(sandbox: str) -> JobStatus:
    return JobStatus(7, "t", "working", "step", (), Usage(), 0.0, "b", sandbox=sandbox)


async def summary(tmp_path: Path, sandbox: Sandbox, project_text: str) -> str:
    org = load_organisation(shipped_org_dir())
    project = load_project(project_text, org=org, source="p", default_name="widgets")
    office = await Office.open(
        tmp_path / "home",
        org=org,
        projects=[project],
        models=lambda _: script.model(),
        env=script.ENV,
        sandbox=sandbox,
    )
    try:
        return office.sandbox_summary("widgets")
    finally:
        await office.close()


async def test_the_summary_names_the_mode_and_the_network(tmp_path: Path, sandbox: Sandbox) -> None:
    bwrap = replace(sandbox, mode="bwrap")
    listed = "humans: {decider: a}\nsandbox: {network: [pypi.org, '*.pythonhosted.org']}\n"
    line = await summary(tmp_path, bwrap, listed)
    assert line == (
        "bubblewrap, the task's worktree only; network: only pypi.org, *.pythonhosted.org "
        "(through a filtering proxy)"
    )
    default = await summary(tmp_path / "2", bwrap, "humans: {decider: a}\n")
    assert default.endswith("network: off")


async def test_an_unconfined_job_says_so_in_every_tracking_comment(
    tmp_path: Path, sandbox: Sandbox
) -> None:
    off = replace(sandbox, mode="off")
    line = await summary(tmp_path, off, "humans: {decider: a}\nsandbox: {network: open}\n")
    body = tracking_body(status(line), branch_url=None, trigger_label="teaparty", agent=AGENT)
    assert "**Sandbox:** ⚠️ OFF (TEAPARTY_SANDBOX=off): agents' processes run unconfined" in body
    assert "network: open" in body
