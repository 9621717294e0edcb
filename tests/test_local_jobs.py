"""What the edge's local run asks of the engine about the job it resumes
(orchestrator/jobs/local_jobs.py): which branch it has, or why it cannot be resumed."""

from __future__ import annotations

from pathlib import Path

import pytest
from demo_office import NOWHERE
from local_repo import ENV, git, make_repo

from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.jobs.local_jobs import ResumeError, local_job_prefix, resumable_branch
from orchestrator.jobs.local_repo import local_repository, read_project
from orchestrator.jobs.model_choice import models
from orchestrator.jobs.office import JobSource, Office
from orchestrator.jobs.withdraw import withdraw


async def test_a_job_is_resumed_on_its_branch_only_as_a_local_job_of_its_repository(
    tmp_path: Path,
) -> None:
    repo = make_repo(tmp_path / "widgets")
    org = load_organisation(shipped_org_dir())
    project, text = await read_project(repo, org)
    office = await Office.open(
        tmp_path / "home",
        sandbox=NOWHERE,
        scripted=True,
        org=org,
        projects=[project],
        models=models("scripted", ENV),
        env=ENV,
    )
    try:

        async def start(key: str) -> int:
            started = await office.start_job(
                project=project.name,
                key=key,
                title="t",
                brief="b",
                source=JobSource(
                    repo=local_repository(repo),
                    source=str(repo),
                    start=git(repo, "rev-parse", "HEAD").strip(),
                    branch=lambda job_id: f"teaparty/job-{job_id}-t",
                    slug="t",
                ),
                project_text=text,
            )
            return started.job_id

        local = await start(f"{local_job_prefix(repo)}nonce")
        issue = await start("github:acme/widgets#7")
        # Before its workspace is made: the branch its source asks for.
        assert await resumable_branch(office, repo, local) == f"teaparty/job-{local}-t"
        with pytest.raises(ResumeError, match="no job 99 in this state directory"):
            await resumable_branch(office, repo, 99)
        with pytest.raises(ResumeError, match="it is a GitHub issue's"):
            await resumable_branch(office, repo, issue)
        elsewhere = tmp_path / "other"
        with pytest.raises(ResumeError, match=f"not a local job of {elsewhere} .it is local:"):
            await resumable_branch(office, elsewhere, local)
        await withdraw(office, local, by="carol")
        with pytest.raises(ResumeError, match="was cancelled; start a new one instead"):
            await resumable_branch(office, repo, local)
    finally:
        await office.close()
