"""The protected-path gate on GitHub: a job whose worker writes a CI workflow asks before
anything is pushed, and `/approve <hash>` pushes exactly the head the question showed.

The App runs in this process against the local GitHub stand-in.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from app_harness import (
    NOWHERE,
    OWNER,
    REPO,
    app_settings,
    approve_plan,
    in_process,
    protected_question,
    until,
    world,
)

from orchestrator.jobs.offline import DemoModel

pytestmark = pytest.mark.timeout(180)
CI = ".github/workflows/ci.yml"


async def test_a_ci_change_is_asked_about_and_approve_by_hash_pushes_that_head(
    tmp_path: Path,
) -> None:
    hub, port, pem = world(tmp_path)
    demo = DemoModel(title="Add CI", body="Run the tests on push.", path=CI)
    remote = hub.root / OWNER / f"{REPO}.git"
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem, status_interval_s=0.2)
        number = hub.open_issue(OWNER, REPO, title="Add CI", body="Please.", author="alice")
        async with in_process(settings, lambda _: demo, port=port, sandbox=NOWHERE):
            await approve_plan(hub, number)
            asked, short = await protected_question(hub, number)
            head = re.search(r"Head commit: ([0-9a-f]{40})", asked)
            assert head is not None
            assert CI in asked
            assert "Diff: 1 file changed" in asked
            assert f"approves exactly commit `{head.group(1)[:12]}`" in asked
            assert "@alice" in asked
            assert hub.pulls(OWNER, REPO) == []
            assert not _branches(remote), "nothing is pushed before the approval"

            await hub.comment_as(OWNER, REPO, number, "alice", f"/approve {short}")
            await until(lambda: hub.pulls(OWNER, REPO), what="the pull request", limit=90)
            (pull,) = hub.pulls(OWNER, REPO)
            assert pull.pull is not None
            pushed = _git(remote, "rev-parse", f"refs/heads/{pull.pull.head_ref}").strip()
            assert pushed == head.group(1)
            assert CI in _git(remote, "ls-tree", "-r", "--name-only", pushed)
    assert hub.violations == []


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], check=True, capture_output=True, text=True
    ).stdout


def _branches(repo: Path) -> list[str]:
    return _git(repo, "branch", "--list", "teaparty/*").split()
