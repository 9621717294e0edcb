"""The protected-path gate on GitHub: a job whose worker writes a CI workflow asks before
anything is pushed, and `/approve <hash>` pushes exactly the head the question showed.

The App runs in this process against the local GitHub stand-in.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from app_harness import OWNER, REPO, app_settings, bodies, in_process, until, world

from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox

pytestmark = pytest.mark.timeout(180)
NOWHERE = Sandbox("unavailable", "not needed: the demo model runs no shell")
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
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(lambda: bodies(hub, number, "gate:"), what="the plan question")
            await hub.comment_as(OWNER, REPO, number, "alice", "yes")
            await until(
                lambda: len(bodies(hub, number, "gate:")) == 2,
                what="the protected-path question",
                limit=90,
            )
            asked = bodies(hub, number, "gate:")[1]
            found = re.search(r"`protected-path ([0-9a-f]{7})`", asked)
            head = re.search(r"Head commit: ([0-9a-f]{40})", asked)
            assert found is not None
            assert head is not None
            assert CI in asked
            assert "Diff: 1 file changed" in asked
            assert f"approves exactly commit `{head.group(1)[:12]}`" in asked
            assert "@alice" in asked
            assert hub.pulls(OWNER, REPO) == []
            assert not _branches(remote), "nothing is pushed before the approval"

            await hub.comment_as(OWNER, REPO, number, "alice", f"/approve {found.group(1)}")
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
