"""`teaparty doctor --repo PATH`, as a maintainer runs it: what the setup does, a suggestion
where there is none, the environment prepared in the sandbox and the test command run once."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import confined
from wheelhouse import PYTEST, wheelhouse

from bot.cli import build_parser
from bot.doctor import doctor_command
from orchestrator.api import Sandbox, check_setup, load_organisation, shipped_org_dir
from orchestrator.setup.suggest import suggest

ROOT = Path(__file__).resolve().parent.parent
SETUP = """humans: {decider: alice}
setup:
  commands:
    - python3 -m venv .venv
    - .venv/bin/pip install -q --no-index --find-links wheels pytest tinylib
  secrets: [TINY_TOKEN, OTHER_TOKEN]
  test: python -m pytest -q
"""


def _git(repo: Path, *args: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(repo), "GIT_AUTHOR_NAME": "a"}
    env |= {"GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True)


def repository(path: Path, files: dict[str, str], *, wheels: bool = False) -> Path:
    path.mkdir(parents=True)
    _git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    if wheels:
        wheelhouse(path / "wheels", *PYTEST)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "init")
    return path


def doctor(repo: Path, home: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.environ["PATH"],
        "PYTHONPATH": str(ROOT),
        "TEAPARTY_HOME": str(home),
        "TEAPARTY_SETUP_SECRETS": "TINY_TOKEN",
        "TINY_TOKEN": "tiny-secret-value-93af",
    }
    argv = [sys.executable, "-m", "bot.cli", "doctor", "--repo", str(repo), *extra]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture
def place() -> Iterator[Path]:
    """A directory the agents' users can reach (sandboxed calls run as a uid of their own)."""
    top = Path(tempfile.mkdtemp(dir="/tmp", prefix="teaparty-doctor-"))  # its own per session
    top.chmod(0o711)
    yield top
    subprocess.run(["rm", "-rf", str(top)], check=False)


def test_doctor_prepares_the_setup_and_runs_the_test_command_in_the_sandbox(place: Path) -> None:
    test = "import tinylib\n\n\ndef test_double():\n    assert tinylib.double(2) == 4\n"
    repo = repository(
        place / "repo", {".teaparty/project.yaml": SETUP, "test_it.py": test}, wheels=True
    )
    home = place / "home"
    done = doctor(repo, home)
    assert done.returncode == 0, done.stdout + done.stderr
    said = done.stdout
    assert "  1. python3 -m venv .venv" in said
    assert "secret TINY_TOKEN: given" in said
    assert "secret OTHER_TOKEN: WITHHELD: not in TEAPARTY_SETUP_SECRETS" in said
    assert "first on agents' PATH: .venv/bin" in said
    assert "test `python -m pytest -q` in the sandbox" in said
    assert "passed (exit 0)" in said
    assert "1 passed" in said
    assert "tiny-secret-value-93af" not in said + done.stderr

    again = doctor(repo, home)
    assert "prepared: reused from the cache: .venv" in again.stdout


def test_a_failing_test_command_is_exit_1_with_its_output(place: Path) -> None:
    failing = SETUP.replace("python -m pytest -q", "echo the suite broke; exit 5")
    repo = repository(place / "repo", {".teaparty/project.yaml": failing}, wheels=True)
    done = doctor(repo, place / "home")
    assert done.returncode == 1
    assert "FAILED (exit 5)" in done.stdout
    assert "  | the suite broke" in done.stdout


def test_no_run_describes_without_preparing(place: Path) -> None:
    repo = repository(place / "repo", {".teaparty/project.yaml": SETUP})
    done = doctor(repo, place / "home", "--no-run")
    assert done.returncode == 0, done.stderr
    assert "cache key: " in done.stdout
    assert "prepared" not in done.stdout
    assert not (place / "home" / "setup").exists()


def test_without_setup_a_suggestion_from_the_manifest(place: Path) -> None:
    pyproject = (
        '[project]\nname = "x"\nversion = "1"\n'
        '[project.optional-dependencies]\ntest = ["pytest>=8"]\n'
    )
    repo = repository(place / "repo", {"pyproject.toml": pyproject})
    done = doctor(repo, place / "home")
    assert done.returncode == 0, done.stderr
    said = done.stdout
    assert "setup: none in .teaparty/project.yaml at HEAD" in said
    block = said.split("nothing was run):\n", 1)[1]
    suggested = yaml.safe_load(
        "\n".join(line[2:] for line in block.splitlines() if not line.startswith("  #"))
    )
    assert suggested["setup"]["commands"] == [
        "python3 -m venv .venv",
        ".venv/bin/pip install -e '.[test]'",
    ]
    assert suggested["setup"]["test"] == ".venv/bin/python -m pytest -q"


@pytest.mark.parametrize(
    ("files", "command", "test"),
    [
        (
            {"package.json": '{"scripts": {"test": "node --test"}}', "package-lock.json": "{}"},
            "npm ci",
            "npm test",
        ),
        ({"package.json": "{}", "yarn.lock": ""}, "yarn install --frozen-lockfile", None),
        (
            {"requirements.txt": "", "requirements-dev.txt": ""},
            ".venv/bin/pip install -r requirements-dev.txt -r requirements.txt",
            ".venv/bin/python -m pytest -q",
        ),
        (
            {"Cargo.toml": "", "Cargo.lock": ""},
            "CARGO_HOME=.cargo cargo fetch",
            "CARGO_HOME=.cargo cargo test --offline",
        ),
        (
            {"go.mod": ""},
            "GOMODCACHE=$PWD/.gomodcache go mod download",
            "GOMODCACHE=$PWD/.gomodcache GOFLAGS=-mod=mod go test ./...",
        ),
    ],
)
def test_suggestions_by_manifest(files: dict[str, str], command: str, test: str | None) -> None:
    found = suggest(frozenset(files), files.get)
    assert found is not None
    assert command in found.setup["commands"]  # type: ignore[operator]
    assert found.setup.get("test") == test


def test_a_broken_manifest_still_gets_a_plain_suggestion() -> None:
    found = suggest(frozenset({"pyproject.toml"}), {"pyproject.toml": "[project\n"}.get)
    assert found is not None
    assert found.setup["commands"] == ["python3 -m venv .venv", ".venv/bin/pip install -e ."]
    assert suggest(frozenset({"README.md"}), {}.get) is None


CHEAP = """humans: {decider: alice}
setup:
  commands: ["mkdir -p out && echo 'print(\\"ran\\")' > out/it.py"]
  key_files: [key.txt]
  network: [python, mirror.example.org]
  secrets: [TINY_TOKEN, OTHER_TOKEN]
  test: TEST
"""


@pytest.fixture
def confined_place(tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A bubblewrap sandbox and a directory its agents' users can reach, in this process."""
    for found, work in confined("bwrap", f"doctor-{tmp_path.name}"):
        yield found, work.parent
        asyncio.run(found.close())  # the egress proxy a setup's network started


@pytest.mark.parametrize(("test", "passed"), [("python3 out/it.py", True), ("exit 4", False)])
async def test_check_setup_in_process(
    confined_place: tuple[Sandbox, Path], test: str, passed: bool
) -> None:
    sandbox, top = confined_place
    files = {".teaparty/project.yaml": CHEAP.replace("TEST", test), "key.txt": "1"}
    repo = await asyncio.to_thread(repository, top / "repo", files)
    org = load_organisation(shipped_org_dir())
    env = {"PATH": "/usr/bin:/bin", "TINY_TOKEN": "tiny-secret-value-93af"}
    verdict = await check_setup(
        repo, org=org, sandbox=sandbox, home=top / "home", env=env, allowed=("TINY_TOKEN",)
    )
    said = "\n".join(verdict.lines)
    assert verdict.ok is passed
    assert (
        "network during setup: python (pypi.org, files.pythonhosted.org); mirror.example.org"
        in said
    )
    assert "secret OTHER_TOKEN: WITHHELD" in said
    assert "keyed by: key.txt" in said
    assert "prepared: in " in said
    assert ("passed (exit 0)" if passed else "FAILED (exit 4)") in said
    described = await check_setup(
        repo, org=org, sandbox=sandbox, home=top / "home", env=env, run=False
    )
    assert described.ok
    assert described.lines[-1].startswith("  cache key: ")


async def test_check_setup_without_setup_suggests_in_process(
    confined_place: tuple[Sandbox, Path],
) -> None:
    sandbox, top = confined_place
    files = {"package.json": '{"scripts": {"test": "node --test"}}', "package-lock.json": "{}"}
    repo = await asyncio.to_thread(repository, top / "repo", files)
    org = load_organisation(shipped_org_dir())
    verdict = await check_setup(repo, org=org, sandbox=sandbox, home=top / "home", env={})
    said = "\n".join(verdict.lines)
    assert verdict.ok
    assert "    - npm ci" in said
    assert "  # package-lock.json: installed exactly as locked" in said
    bare = await asyncio.to_thread(repository, top / "bare", {"README.md": "hi"})
    verdict = await check_setup(bare, org=org, sandbox=sandbox, home=top / "home", env={})
    assert "suggestion: none" in verdict.lines[-1]


def run_doctor(repo: Path, home: Path, *extra: str, env: dict[str, str] | None = None) -> int:
    args = build_parser().parse_args(["doctor", "--repo", str(repo), "--home", str(home), *extra])
    return doctor_command(args, {"PATH": "/usr/bin:/bin", **(env or {})})


def test_bad_input_is_named_with_exit_2(
    confined_place: tuple[Sandbox, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    _, top = confined_place
    (top / "plain").mkdir()
    assert run_doctor(top / "plain", top / "home", "--no-run") == 2
    assert "teaparty doctor --repo: " in capsys.readouterr().err
    broken = {".teaparty/project.yaml": "humans: {decider: alice}\nsetup:\n  commands: []\n"}
    repo = repository(top / "broken", broken)
    assert run_doctor(repo, top / "home", "--no-run") == 2
    said = capsys.readouterr().err
    assert ".teaparty/project.yaml:2: setup: " in said
    assert "setup needs commands, a test command, or both" in said
    repo = repository(top / "fine", {".teaparty/project.yaml": CHEAP.replace("TEST", "exit 0")})
    bad = {"TEAPARTY_SETUP_SECRETS": "GITHUB_TOKEN"}
    assert run_doctor(repo, top / "home", "--no-run", env=bad) == 2
    assert "GITHUB_TOKEN is one of the App's own credentials" in capsys.readouterr().err
    assert run_doctor(repo, top / "home", "--no-run") == 0
    assert "  1. mkdir -p out" in capsys.readouterr().out


async def test_doctor_says_which_instruction_files_agents_read(tmp_path: Path) -> None:
    files = {
        "AGENTS.md": "root\n",
        "pkg/AGENTS.md": "pkg\n",
        ".github/instructions/py.instructions.md": "---\napplyTo: '**/*.py'\n---\npy\n",
        ".github/instructions/bare.instructions.md": "no front matter\n",
    }
    repo = await asyncio.to_thread(repository, tmp_path / "repo", files)
    org = load_organisation(shipped_org_dir())
    nowhere = Sandbox("unavailable", "not needed: nothing runs")

    verdict = await check_setup(repo, org=org, sandbox=nowhere, home=tmp_path / "h", env={})

    assert verdict.lines[1:5] == (
        "instructions for agents: AGENTS.md (every agent of the project)",
        "  pkg/AGENTS.md: for pkg/",
        "  .github/instructions/py.instructions.md: for **/*.py",
        "  not read: .github/instructions/bare.instructions.md (no applyTo: it applies to nothing)",
    )
