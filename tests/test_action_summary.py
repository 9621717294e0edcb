"""`teaparty action`'s step summary, written by a separate process as a workflow run gives
it: the job's summary and, with the project's `runner: {summary_transcripts: true}`, each
conversation's transcript folded, against the local GitHub stand-in."""

from __future__ import annotations

from pathlib import Path

import pytest
from action_harness import NO_PLAN, act, labelled, last, runner_hub
from app_harness import OWNER, REPO

from bot.runner.summary import TRANSCRIPTS_OFF

pytestmark = pytest.mark.timeout(180)


async def test_a_run_writes_the_jobs_summary_with_its_transcripts_folded(tmp_path: Path) -> None:
    hub = runner_hub(tmp_path)
    project = NO_PLAN + "runner: {summary_transcripts: true}\n"
    async with hub.serve() as api_url:
        await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": project})
        await labelled(hub, "Add a changelog", "Please.")
        run = await act(hub, api_url, tmp_path, "issues", last(hub, "issues"))
        assert run.code == 0, run.output
    summary = run.summary
    assert "### Job 1: Add a changelog" in summary
    assert "**State:** done" in summary
    assert "**Tasks** (1 of 1 done)" in summary
    assert "conversations)</summary>" in summary
    assert "messages</summary>" in summary
    assert TRANSCRIPTS_OFF not in summary
    assert summary.count("<details>") == summary.count("</details>")
    assert len(summary.encode()) < 512 * 1024
    assert hub.violations == [], hub.violations
