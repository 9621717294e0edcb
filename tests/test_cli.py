"""`teaparty config check`: organisations, repositories, single files, and exit codes."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from orgfiles import write, write_org

from bot.cli import main
from orchestrator.api import GATE_KINDS
from orchestrator.config import check_paths, shipped_org_dir

SOURCE = ".teaparty/project.yaml"


@pytest.fixture
def org_dir(tmp_path: Path) -> Path:
    return write_org(tmp_path / "org")


def test_check_a_project_repository(
    org_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo = tmp_path / "widgets"
    write(repo / SOURCE, "humans: {decider: alice}\nworkgroups: [{ref: coding}]\n")
    assert main(["config", "check", str(repo), "--org", str(org_dir)]) == 0
    assert capsys.readouterr().out == f"ok: {repo} (1 workgroup, 4 agents)\n"


def test_check_a_broken_project_file_against_the_env_org(
    org_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("TEAPARTY_CONFIG", str(org_dir))
    path = write(tmp_path / "project.yaml", "humans: {decider: alice}\nworkgroups: [{ref: web}]\n")
    assert main(["config", "check", str(path)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    message = "no workgroup 'web' in the organisation's catalog; known: coding"
    assert err == f"{path}:2: workgroups[0].ref: {message}\n"


def test_check_single_files(org_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    paths = [
        org_dir / "teaparty.yaml",
        org_dir / "workgroups/coding.yaml",
        org_dir / "agents/proxy.yaml",
    ]
    assert main(["config", "check", *map(str, paths)]) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"ok: {paths[0]} (1 workgroup, 6 agents)",
        f"ok: {paths[1]} (1 workgroup, 3 agents)",
        f"ok: {paths[2]} (0 workgroups, 1 agent)",
    ]


def test_check_a_lone_agent_file_checks_its_schema(tmp_path: Path) -> None:
    path = write(
        tmp_path / "helper.yaml", "name: helper\ndescription: H.\nprompt: P.\ntools: [x]\n"
    )
    [issue] = check_paths([path], org_dir=tmp_path, kinds=GATE_KINDS)
    known = "known tools: answer_review, ask_human"
    assert str(issue).startswith(f"{path}:4: tools[0]: unknown tool 'x'; {known}")


def test_check_a_directory_that_is_neither(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "check", str(tmp_path)]) == 1
    assert "neither an organisation" in capsys.readouterr().err


def test_check_a_path_that_does_not_exist(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["config", "check", str(tmp_path / "nope")]) == 2
    assert f"no such file or directory: {tmp_path / 'nope'}" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config"]) == 2
    assert main(["frobnicate"]) == 2
    assert "usage: teaparty" in capsys.readouterr().err


def test_check_a_project_file_inside_a_repository(
    org_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path / "widgets" / SOURCE, "humans: {decider: alice}\n")
    assert main(["config", "check", "--org", str(org_dir), str(path)]) == 0
    assert capsys.readouterr().out == f"ok: {path} (1 workgroup, 4 agents)\n"


def test_check_tells_workgroup_files_by_their_keys(tmp_path: Path) -> None:
    workgroup = write(tmp_path / "team.yaml", "name: team\nlead: a\nmembers: [b, a]\n")
    other = write(tmp_path / "other.yaml", "name: x\n")
    issues = check_paths(
        [workgroup, other, tmp_path / "gone.yaml"], org_dir=tmp_path, kinds=GATE_KINDS
    )
    assert [str(issue) for issue in issues] == [
        f"{workgroup}:3: members[1]: 'a' is already on this team as lead",
        f"{other}: cannot tell an agent (has prompt) from a workgroup (has members); "
        "put it in agents/ or workgroups/",
        f"{tmp_path / 'gone.yaml'}: no such file or directory",
    ]


def test_check_defaults_to_config_in_the_working_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    write_org(tmp_path / "config")
    monkeypatch.chdir(tmp_path)
    assert main(["config", "check"]) == 0
    assert capsys.readouterr().out == "ok: config (1 workgroup, 6 agents)\n"


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "check", "--help"]) == 0
    assert "--org DIR" in capsys.readouterr().out


def test_check_a_repository_without_a_project_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    assert main(["config", "check", str(tmp_path)]) == 0
    assert (
        capsys.readouterr().out
        == f"ok: {tmp_path} (no .teaparty/project.yaml: the defaults apply)\n"
    )


def test_check_an_organisation_whose_prices_miss_an_agents_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = tmp_path / "org"
    shutil.copytree(shipped_org_dir(), org, ignore=shutil.ignore_patterns("__pycache__", "*.py"))
    (org / "models.yaml").write_text(
        "models:\n  claude-haiku-4-5: {input: 1, output: 5, cache_read: 0.1, cache_write: 1.25}\n"
    )
    assert main(["config", "check", str(org)]) == 1
    err = capsys.readouterr().err
    assert f"no price for model 'claude-sonnet-4-6' in {org / 'models.yaml'}; add it there" in err


def test_an_ignored_runner_event_loads_no_engine() -> None:
    """`teaparty action` on an event it ignores exits before the engine is imported: its
    command line builds the one command's parser, and reading a payload imports no engine
    (an import of `orchestrator.api` in payloads.py once tripled the run's CPU time)."""
    probe = (
        "import sys\n"
        "import bot.cli, bot.runner.env\n"
        "bot.cli.build_parser(only='action')\n"
        "heavy = ('orchestrator.api', 'orchestrator.jobs', 'orchestrator.store', 'fastapi')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout
