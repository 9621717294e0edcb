"""The setup cache's bound, what a setup may reach, and how a job's environment shows on its
tracking comment."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.github.outbound import Outbound
from bot.github.tracking import tracking_body
from orchestrator.config.schema import SetupSettings
from orchestrator.core.errors import SandboxError
from orchestrator.core.messages import Usage
from orchestrator.jobs.ports import JobStatus
from orchestrator.sandbox.confine import Network, Place, Sandbox
from orchestrator.sandbox.processes import CappedOutput, Finished
from orchestrator.setup.cache import SetupCache, bound_from_env
from orchestrator.setup.prepare import Preparer


@dataclass
class Recording(Sandbox):
    """A sandbox that runs nothing: each command writes a file of `size` bytes into its
    place (as a setup would leave a directory) and is recorded with its network and env."""

    size: int = 0
    calls: list[tuple[str, Network | None, Mapping[str, str]]] = field(default_factory=list)

    async def run(
        self,
        command: str,
        *,
        place: Place,
        env: Mapping[str, str],
        timeout_s: float,
        cap: int,
        network: Network | None = None,
    ) -> Finished:
        self.calls.append((command, network, dict(env)))
        made = place.work / "made"
        made.mkdir(exist_ok=True)
        (made / "blob").write_bytes(os.urandom(self.size))
        output = CappedOutput(cap)
        output.feed(b"done\n")
        return Finished(0, output)


def recording(size: int = 0) -> Recording:
    return Recording(mode="off", reason="test", size=size)


def git_repo(path: Path, text: str) -> Path:
    """A repository at `path` whose key.txt holds `text`, at a new commit; its git data."""
    path.mkdir(parents=True, exist_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(path), "GIT_AUTHOR_NAME": "t"}
    env |= {"GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    (path / "key.txt").write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", text]):
        subprocess.run(["git", "-C", str(path), *args], env=env, check=True, capture_output=True)
    return path / ".git"


async def test_eviction_drops_the_least_recently_used_entries_no_job_holds(tmp_path: Path) -> None:
    sandbox = recording(size=600 * 1024)
    cache = SetupCache(tmp_path / "setup", bound_mb=1)
    ready = Preparer(sandbox, cache, parent_env={})
    setup = SetupSettings(commands=("make it",), key_files=("key.txt",))
    first = await ready.prepare(
        name="o/r", repo=git_repo(tmp_path / "r", "1"), base="HEAD", setup=setup
    )
    second = await ready.prepare(
        name="o/r", repo=git_repo(tmp_path / "r", "2"), base="HEAD", setup=setup
    )
    assert first.key != second.key
    assert await cache.evict() == []  # both held by this process's jobs: none goes
    cache.release(first.root)
    assert await cache.evict() == [first.root.parent]
    assert not first.root.exists()
    assert second.root.is_dir()
    third = await ready.prepare(
        name="o/r", repo=git_repo(tmp_path / "r", "1"), base="HEAD", setup=setup
    )
    assert not third.reused  # its index went with its entry: prepared again


async def test_a_setup_reaches_only_its_network_and_gets_only_the_operators_secrets(
    tmp_path: Path,
) -> None:
    sandbox = recording()
    env = {"PATH": "/usr/bin:/bin", "NPM_TOKEN": "npm-token-value-1234", "OTHER_KEY": "x" * 12}
    ready = Preparer(
        sandbox, SetupCache(tmp_path / "setup", bound_mb=10), parent_env=env, allowed=("NPM_TOKEN",)
    )
    setup = SetupSettings(
        commands=("npm ci",), network=("node", "npm.example.org"), secrets=("NPM_TOKEN", "MISSING")
    )
    outcome = await ready.prepare(
        name="o/r", repo=git_repo(tmp_path / "r", "1"), base="HEAD", setup=setup
    )
    [(command, network, given)] = sandbox.calls
    assert network is not None
    assert network.hosts == (
        "registry.npmjs.org",
        "registry.yarnpkg.com",
        "repo.yarnpkg.com",
        "npm.example.org",
    )
    assert given["NPM_TOKEN"] == "npm-token-value-1234"
    assert "OTHER_KEY" not in given
    assert outcome.withheld == ("MISSING",)


@pytest.mark.parametrize(("raw", "bound"), [("", 20480), ("512", 512)])
def test_the_cache_bound_comes_from_the_environment(raw: str, bound: int) -> None:
    assert bound_from_env({"TEAPARTY_SETUP_CACHE_MB": raw}) == bound


def test_a_bad_cache_bound_is_named() -> None:
    with pytest.raises(SandboxError, match=r"TEAPARTY_SETUP_CACHE_MB='lots': give a positive"):
        bound_from_env({"TEAPARTY_SETUP_CACHE_MB": "lots"})


def status(**changes: Any) -> JobStatus:
    base = JobStatus(3, "Fix it", "working", "working", (), Usage(10, 1), 0.1, "teaparty/job-3-fix")
    return JobStatus(**{**base.__dict__, **changes})


def test_the_tracking_comment_shows_the_environment_and_a_failed_steps_output() -> None:
    agent = Outbound("octo", "widgets", 3, "https://github.com")
    fine = tracking_body(
        status(setup="setup: reused (2 steps; .venv)"),
        branch_url=None,
        trigger_label="t",
        agent=agent,
    )
    assert "**Environment:** setup: reused (2 steps; .venv)" in fine
    assert "<details>" not in fine
    failed = tracking_body(
        status(
            setup="setup: step `pip install -e .` exited 1; the job goes on without the rest",
            setup_log="ERROR: No matching distribution found for @someone's-package",
        ),
        branch_url=None,
        trigger_label="t",
        agent=agent,
    )
    assert "**Environment:** ⚠️ setup: step `pip install -e .` exited 1" in failed
    assert "<summary>End of the setup step's output</summary>" in failed
    assert "No matching distribution found" in failed
    assert "@someone" not in failed.replace("`@someone", "")  # no live mention in the output


async def test_a_jobs_environment_is_found_again_after_a_restart(tmp_path: Path) -> None:
    """JobSetups records the outcome beside the job's worktree: a new process holds the same
    entry without preparing; where the entry is gone it prepares again."""
    from orchestrator.config.schema import Humans, Project
    from orchestrator.jobs.setups import JobSetups
    from orchestrator.workspace.spaces import JobSpace

    repo = git_repo(tmp_path / "r", "1")
    space = JobSpace(4, repo, repo, "b", "HEAD", tmp_path / "job-4" / "worktree")
    space.path.mkdir(parents=True)
    project = Project.model_construct(
        name="w", humans=Humans(decider="a"), setup=SetupSettings(commands=("make it",))
    )
    bare = Project.model_construct(name="bare", humans=Humans(decider="a"), setup=None)
    projects = {"w": project, "bare": bare}

    async def named(job_id: int) -> str | None:
        return "o/r" if job_id == 4 else None

    def setups(sandbox: Recording) -> JobSetups:
        cache = SetupCache(tmp_path / "setup", bound_mb=100)
        return JobSetups(Preparer(sandbox, cache, parent_env={}), projects, named)

    first = recording()
    outcome = await setups(first).ensure(space, "w")
    assert outcome is not None
    assert len(first.calls) == 1
    again = recording()
    restarted = setups(again)
    assert await restarted.ensure(space, "w") == outcome
    assert again.calls == []  # found by its record, not prepared
    assert await restarted.prepared(space, "bare") is None
    assert await restarted.ensure(JobSpace(5, repo, repo, "b", "HEAD", tmp_path), "w") is None
    restarted.release(4)
    assert restarted.known(4) == outcome  # the final status still shows it
    restarted.preparer.cache.release(outcome.root)
    await asyncio.to_thread(shutil.rmtree, outcome.root.parent)
    third = recording()
    prepared_again = await setups(third).ensure(space, "w")
    assert prepared_again is not None
    assert prepared_again.root != outcome.root
    assert len(third.calls) == 1
