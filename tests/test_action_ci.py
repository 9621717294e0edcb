"""Runner mode follows CI through `workflow_run: completed`: each workflow run a separate
`teaparty action` process with only its event file, against the local GitHub stand-in. A
failed CI run on the job's pull request re-runs its job once, and the run its completion
brings starts one round, as in App mode; with GITHUB_TOKEN the tracking comment says why CI
does not run on the job's own pushes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from action_harness import act, delivered, last, runner_hub
from app_harness import OWNER, REPO, bodies
from test_app_ci import FAILED_LINE, FAILING

pytestmark = pytest.mark.timeout(180)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


async def test_a_failed_ci_run_on_the_pull_request_is_a_round_in_runner_mode(
    tmp_path: Path,
) -> None:
    hub = runner_hub(tmp_path)
    remote = hub.root / OWNER / f"{REPO}.git"
    async with hub.serve() as api_url:
        number, pr = await delivered(hub, api_url, tmp_path)
        said = bodies(hub, number, "job:")[0]
        assert "CI does not run on this job's pushes: they are made with GITHUB_TOKEN" in said
        (pull,) = hub.pulls(OWNER, REPO)
        assert pull.pull is not None
        branch = pull.pull.head_ref
        first = git(remote, "rev-parse", branch)

        await hub.run_checks(OWNER, REPO, first, [FAILING])
        rerun = await act(hub, api_url, tmp_path, "workflow_run", last(hub, "workflow_run"))
        assert rerun.code == 0, rerun.output
        assert "re-running `tests`" in rerun.summary, rerun.summary
        assert [op for op, _ in hub.ci_reruns()] == ["actions/re-run-job-for-workflow-run"]

        # The re-run failed again: the run its completion brings starts the round.
        again = await act(hub, api_url, tmp_path, "workflow_run", last(hub, "workflow_run"))
        assert again.code == 0, again.output
        tracking = bodies(hub, number, "job:")[0]
        assert "round 1 (CI): 1 point(s), 1 answered; pushed" in tracking, tracking
        after = git(remote, "rev-parse", branch)
        assert after != first
        assert FAILED_LINE in git(remote, "show", f"{after}:docs/reviews/round-1.md")
    assert hub.violations == [], hub.violations
