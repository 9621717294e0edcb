"""A repository's setup, prepared once in the sandbox and used by a task's shell, under every
sandbox this host gives: a virtualenv with pytest and a package the host lacks, installed
from the repository's own wheelhouse (no index is reached), and an editable install that
imports the task's code, not the setup checkout's."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import confined, hand_to_agents
from wheelhouse import PYTEST, wheelhouse

from orchestrator.config.schema import SetupSettings
from orchestrator.sandbox.confine import Place, Sandbox
from orchestrator.setup.cache import SetupCache
from orchestrator.setup.prepare import Outcome, Preparer
from orchestrator.workspace.shell import agent_env

SECRET = "s3tup-only-value-4f9c2b"
SETUP = SetupSettings(
    commands=(
        "python3 -m venv .venv",
        ".venv/bin/pip install -q --no-index --find-links wheels pytest tinylib 'setuptools>=70.1'",
        ".venv/bin/pip install -q --no-index --no-build-isolation -e .",
        'echo "token: $TINY_INDEX_TOKEN ($(printf %s "$TINY_INDEX_TOKEN" | wc -c))"',
    ),
    key_files=("pyproject.toml",),
    secrets=("TINY_INDEX_TOKEN",),
    test="python -m pytest -q",
)
PYPROJECT = """[build-system]
requires = ["setuptools>=64"]
build-backend = "setuptools.build_meta"

[project]
name = "calcpkg"
version = "0.1"

[tool.setuptools.packages.find]
where = ["src"]
"""
TEST = """import calcpkg
import tinylib


def test_add():
    assert calcpkg.add(2, 3) == 5
    assert tinylib.double(calcpkg.add(1, 1)) == 4
"""


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "HOME": str(repo)}
    env |= {"GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", "-C", str(repo), *args], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def project(repo: Path, *, add: str = "a - b") -> str:
    """The repository's files at a new commit (its calcpkg.add returns `add`); the commit."""
    (repo / "src" / "calcpkg").mkdir(parents=True, exist_ok=True)
    (repo / "src" / "calcpkg" / "__init__.py").write_text(f"def add(a, b):\n    return {add}\n")
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "test_calc.py").write_text(TEST)
    if not (repo / "wheels").exists():
        wheelhouse(repo / "wheels", *PYTEST)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "project")
    return _git(repo, "rev-parse", "HEAD")


@pytest.fixture(params=["bwrap", "landlock"])
def setting(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path, Path]]:
    """A sandbox, a task's worktree its agents own, and the state directory beside it."""
    for found, work in confined(request.param, f"setup-{tmp_path.name}"):
        yield found, work, work.parent


def preparer(sandbox: Sandbox, home: Path) -> Preparer:
    return Preparer(
        sandbox,
        SetupCache(home / "setup", bound_mb=1024),
        parent_env={"PATH": "/usr/bin:/bin", "TINY_INDEX_TOKEN": SECRET, "LANG": "C.UTF-8"},
        allowed=("TINY_INDEX_TOKEN",),
        owner=lambda _: sandbox.run_as,
        mask=lambda text: text.replace(SECRET, "***"),
    )


async def shell(sandbox: Sandbox, work: Path, outcome: Outcome, command: str) -> tuple[int, str]:
    env = agent_env({"PATH": "/usr/bin:/bin", "TINY_INDEX_TOKEN": SECRET}, sandbox=sandbox)
    place = Place(work, writable=True, run_as=sandbox.run_as, prepared=outcome.prepared())
    done = await sandbox.run(command, place=place, env=env, timeout_s=120, cap=20_000)
    return done.returncode or 0, done.output.text()


async def test_a_task_runs_the_projects_tests_in_the_prepared_environment(
    setting: tuple[Sandbox, Path, Path],
) -> None:
    sandbox, work, home = setting
    repo = home / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    base = project(repo)
    outcome = await preparer(sandbox, home).prepare(
        name="octo/calc", repo=repo / ".git", base=base, setup=SETUP
    )
    assert outcome.ok, "\n".join(f"{s.command}: {s.exit_code}\n{s.tail}" for s in outcome.steps)
    assert ".venv" in outcome.paths
    assert outcome.bin == (".venv/bin",)
    assert outcome.steps[-1].tail.strip() == f"token: *** ({len(SECRET)})"
    assert SECRET not in outcome.to_json()
    # the task's own code: its add is right where the base's was wrong
    shutil.copytree(repo / "src", work / "src")
    shutil.copy(repo / "test_calc.py", work)
    (work / "src" / "calcpkg" / "__init__.py").write_text("def add(a, b):\n    return a + b\n")
    hand_to_agents(work, sandbox)

    code, output = await shell(sandbox, work, outcome, "python -m pytest -q -p no:cacheprovider")
    assert code == 0, output
    assert "1 passed" in output
    code, output = await shell(
        sandbox, work, outcome, 'echo "[$TINY_INDEX_TOKEN]"; command -v python'
    )
    assert output.splitlines() == ["[]", f"{work}/.venv/bin/python"]
    # what a call writes into the environment ends with it, in the worktree and the cache
    code, output = await shell(sandbox, work, outcome, ".venv/bin/pip install -q --no-index x")
    assert code != 0
    assert not (outcome.root / ".venv" / "planted").exists()
    await shell(sandbox, work, outcome, "touch .venv/planted")
    assert not (outcome.root / ".venv" / "planted").exists()
    assert not (work / ".venv" / "planted").exists()

    again = await preparer(sandbox, home).prepare(
        name="octo/calc", repo=repo / ".git", base=base, setup=SETUP
    )
    assert again.reused
    assert again.root == outcome.root


def one_file_repo(repo: Path, name: str) -> Path:
    """A repository at `repo` whose one commit holds `name` with the text "one"."""
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / name).write_text("one")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "one")
    return repo


@pytest.fixture
def bubblewrap(tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A bubblewrap sandbox and a state directory its agents' users can reach."""
    for found, work in confined("bwrap", f"setup-key-{tmp_path.name}"):
        yield found, work.parent


async def test_a_changed_key_file_prepares_again_and_a_failed_step_is_not_kept(
    bubblewrap: tuple[Sandbox, Path],
) -> None:
    sandbox, home = bubblewrap
    repo = one_file_repo(home / "repo", "pyproject.toml")
    setup = SetupSettings(commands=("mkdir -p out && echo built > out/x",), key_files=("*.toml",))
    ready = preparer(sandbox, home)
    first = await ready.prepare(name="o/r", repo=repo / ".git", base="HEAD", setup=setup)
    assert first.ok
    assert first.paths == ("out",)
    assert not first.reused
    assert (await ready.prepare(name="o/r", repo=repo / ".git", base="HEAD", setup=setup)).reused
    (repo / "pyproject.toml").write_text("two")
    _git(repo, "commit", "-q", "-am", "two")
    second = await ready.prepare(name="o/r", repo=repo / ".git", base="HEAD", setup=setup)
    assert not second.reused
    assert second.root != first.root

    failing = SetupSettings(commands=("mkdir out", "echo broke; exit 3", "touch never"))
    broken = await ready.prepare(name="o/r", repo=repo / ".git", base="HEAD", setup=failing)
    assert not broken.ok
    assert broken.failed is not None
    assert (broken.failed.exit_code, broken.failed.tail.strip()) == (3, "broke")
    assert len(broken.steps) == 2
    assert "INCOMPLETE" in broken.brief()
    assert "exited 3" in broken.summary()
    retried = await ready.prepare(name="o/r", repo=repo / ".git", base="HEAD", setup=failing)
    assert not retried.reused
    assert retried.root != broken.root


async def test_two_jobs_preparing_one_key_at_once_run_it_once(
    bubblewrap: tuple[Sandbox, Path],
) -> None:
    sandbox, home = bubblewrap
    repo = one_file_repo(home / "repo", "a")
    setup = SetupSettings(commands=("mkdir out && echo ran >> out/runs",))
    ready = preparer(sandbox, home)
    both = await asyncio.gather(
        *(ready.prepare(name="o/r", repo=repo / ".git", base="HEAD", setup=setup) for _ in "ab")
    )
    assert sorted(outcome.reused for outcome in both) == [False, True]
    assert both[0].root == both[1].root
    assert (both[0].root / "out" / "runs").read_text() == "ran\n"
