"""Agents that have a shell are told what it has (workspace/inventory.py): workers and
reviewers, from their first turn and again after a restart; leads are not.

The survey runs in a real sandbox, as an agent's shell call runs, its PATH made from the
engine's environment as `teaparty serve` makes it: `/usr/bin` first, as for an engine
installed from /usr/bin/python3 (which has no pytest on this host), then the engine's own
interpreter, which Landlock may leave out of an agent's reach (said so).
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import teams_script as script
from conftest import confined
from test_sandbox_python import ENGINE, private_ancestor

from orchestrator.jobs.office import JobSource
from orchestrator.sandbox.confine import NO_NETWORK, Network, Prepared, Sandbox
from orchestrator.workspace.inventory import Inventories, describe, parse, survey

SYSTEM_PYTHON = Path("/usr/bin/python3")
WORKER = "widgets/coding/implementer"
OUTPUT = "\n".join(
    [
        "python\tpython3\t/v/bin/python3\t/usr/bin/python3.12\t3.12.1\tpip 24.0 from /v\t",
        "python\tpython\t/v/bin/python\t/usr/bin/python3.12\t3.12.1\tpip 24.0 from /v\t",
        "tool\tnode\t/usr/bin/node\tv20.20.2",
        "tool\tmake\t/usr/bin/make\tGNU Make 4.3",
        "missing\tgo",
        "missing\tcargo",
        "unseen\t/root/.pyenv/versions/3.11.7/bin",
        "garbage",
    ]
)


def system_python() -> tuple[str, bool]:
    """The version of /usr/bin/python3, and whether it has pytest (skip without one)."""
    if not SYSTEM_PYTHON.exists():
        pytest.skip("no /usr/bin/python3 on this host")
    version = subprocess.run(
        [SYSTEM_PYTHON, "-c", 'import sys; print("%d.%d.%d" % sys.version_info[:3])'],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    has_pytest = subprocess.run(
        [SYSTEM_PYTHON, "-m", "pytest", "--version"], capture_output=True, check=False
    )
    return version, has_pytest.returncode == 0


@pytest.fixture(params=["bwrap", "landlock"])
def box(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    yield from confined(request.param, f"inventory-{tmp_path.name}")


@pytest.fixture
def landlock(tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A root engine's Landlock sandbox, its Python under a private directory."""
    if os.geteuid() != 0 or private_ancestor(ENGINE) is None:
        pytest.skip("needs a root engine whose Python lies under a private directory")
    yield from confined("landlock", f"inventory-{tmp_path.name}")


def test_the_report_says_what_the_shell_has_and_lacks_in_a_few_lines() -> None:
    found = parse(OUTPUT)
    assert describe(found, network=NO_NETWORK) == (
        "Your shell has: python3 and python 3.12.1 (/v/bin/python3; pip 24.0; pytest missing), "
        "node 20.20.2, make 4.3; no go, cargo.\n"
        "On your PATH but out of the sandbox's reach: /root/.pyenv/versions/3.11.7/bin.\n"
        "There is no network: nothing missing can be installed."
    )
    listed = describe(found, network=Network(hosts=("pypi.org",)), prepared="Prepared: .venv.")
    assert listed.startswith("Prepared: .venv.\nYour shell has: ")
    assert listed.endswith("The network reaches only pypi.org (through a filtering proxy).")
    assert describe(found, network=Network(open=True)).endswith("The network is open.")


def test_a_python_that_does_not_run_and_a_bare_shell_are_said_so() -> None:
    broken = parse("python\tpython3\t/b/python3\t/b/python3\t\t\t\nmissing\tpython\n")
    assert describe(broken, network=NO_NETWORK).splitlines()[0] == (
        "Your shell has: python3 (/b/python3, which does not run); no python."
    )
    bare = describe(parse(""), network=NO_NETWORK)
    assert bare.startswith("Your shell has: none of the usual tools.")


async def test_the_shell_names_its_python_and_says_pytest_is_missing(
    box: tuple[Sandbox, Path],
) -> None:
    version, has_pytest = system_python()
    if has_pytest:
        pytest.skip("/usr/bin/python3 has pytest on this host")
    sandbox, work = box
    text = describe(
        await survey(sandbox, parent_env={"PATH": "/usr/bin:/bin"}, home=work.parent),
        network=NO_NETWORK,
    )
    said = rf"python3 {re.escape(version)} \(/usr/bin/python3; [^;)]*; pytest missing\)"
    assert re.search(said, text), text
    assert "There is no network" in text
    if sandbox.mode == "bwrap":  # the engine's own Python is there too, and reachable
        assert "out of the sandbox's reach" not in text


async def test_a_prepared_environments_python_comes_first_named_in_the_worktree(
    box: tuple[Sandbox, Path],
) -> None:
    system_python()
    sandbox, work = box
    root = work.parent / "prepared"
    venv = [SYSTEM_PYTHON, "-m", "venv", "--without-pip", root / ".venv"]
    await asyncio.to_thread(subprocess.run, venv, check=True, capture_output=True)
    prepared = Prepared(root, (".venv",), (".venv/bin",))
    found = await survey(
        sandbox, parent_env={"PATH": "/usr/bin:/bin"}, home=work.parent, prepared=prepared
    )
    said = describe(found, network=NO_NETWORK)
    assert re.search(
        r"python3 and python [\d.]+ \(\.venv/bin/python3; no pip; pytest missing\)", said
    )


async def test_under_landlock_an_unreachable_python_is_named(
    landlock: tuple[Sandbox, Path],
) -> None:
    """Landlock keeps the host's permissions: the report says what agents cannot reach."""
    sandbox, work = landlock
    inventories = Inventories(sandbox, parent_env={"PATH": "/usr/bin:/bin"}, home=work.parent)
    found = await inventories.of()
    assert found is not None
    assert await inventories.of() is found  # once for the engine's lifetime
    text = describe(found, network=NO_NETWORK)
    assert f"On your PATH but out of the sandbox's reach: {ENGINE}/bin." in text


async def test_a_survey_that_cannot_run_tells_nothing(tmp_path: Path) -> None:
    nowhere = Sandbox("unavailable", "none here")
    assert await Inventories(nowhere, parent_env={}, home=tmp_path).of() is None


async def test_workers_and_reviewers_are_told_what_their_shell_has(tmp_path: Path) -> None:
    version, has_pytest = system_python()
    repo = script.make_repo(tmp_path / "widgets")
    model = script.model()
    office = await script.open_office(tmp_path / "home", model)  # PATH=/usr/bin:/bin
    try:
        if not office.sandbox.confined:
            pytest.skip(f"no sandbox here: {office.sandbox.reason}")
        job = await script.start(office, repo)
        await office.run(job, script.never)
    finally:
        await office.close()
    told = {
        request.agent.rsplit("/", 1)[-1]
        for request in model.requests
        if "## Your shell\nYour shell has: " in request.system
        and f"python3 {version} (/usr/bin/python3; " in request.system
        and ("pytest missing" in request.system or has_pytest)
    }
    assert told == {"implementer", "spec-reviewer", "quality-reviewer", "phase-reviewer"}


async def test_a_restarted_engine_tells_them_again_and_leads_are_not_told(tmp_path: Path) -> None:
    repo = script.make_repo(tmp_path / "widgets")
    office = await script.open_office(tmp_path / "home", script.model())
    if not office.sandbox.confined:
        await office.close()
        pytest.skip(f"no sandbox here: {office.sandbox.reason}")
    head = script.git(repo, "rev-parse", "HEAD").strip()
    source = JobSource("widgets", str(repo), head, lambda _: "teaparty/job-7-a", "a")
    started = await office.start_job(
        project="widgets",
        key="widgets#7",
        title="A",
        brief="Issue #7: A.",
        source=source,
        project_text=script.PROJECT,
    )
    await office.prepare(started.job_id)
    await office.close()
    office = await script.open_office(tmp_path / "home", script.model())
    try:
        assert "## Your shell" not in office.agents.spec(WORKER).system
        assert (await office.resume()).jobs == (started.job_id,)
        assert "## Your shell\nYour shell has: " in office.agents.spec(WORKER).system
        assert "## Your shell" not in office.agents.spec("widgets/project-lead").system
        assert "## Your shell" not in office.agents.spec("widgets/coding/coding-lead").system
    finally:
        await office.close()


async def test_agents_are_told_what_setup_prepared_and_that_it_is_incomplete(
    tmp_path: Path,
) -> None:
    """A setup whose second command fails: the job goes on, and its shell agents read what
    was prepared, that the environment is incomplete, which step failed, and its output."""
    failing = 'setup:\n  commands: ["mkdir -p out && touch out/made", "echo broke here; exit 3"]\n'
    repo = script.make_repo(tmp_path / "widgets")
    office = await script.open_office(tmp_path / "home", script.model(), script.PROJECT + failing)
    try:
        if not office.sandbox.confined:
            pytest.skip(f"no sandbox here: {office.sandbox.reason}")
        head = script.git(repo, "rev-parse", "HEAD").strip()
        source = JobSource("widgets", str(repo), head, lambda _: "teaparty/job-7-a", "a")
        started = await office.start_job(
            project="widgets", key="widgets#7", title="A", brief="Issue #7: A.", source=source
        )
        await office.prepare(started.job_id)
        system = office.agents.spec(WORKER).system
    finally:
        await office.close()
    assert "The repository's setup prepared: out (read-only" in system
    assert "The environment is INCOMPLETE: setup step `echo broke here; exit 3` exited 3" in system
    assert "broke here" in system.split("INCOMPLETE", 1)[1]
    assert "## Your shell" not in office.agents.spec("widgets/project-lead").system
