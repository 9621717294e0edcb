"""What `teaparty` tells a person to type next works when pasted into a shell: the state
directory named, paths with spaces quoted; and commands that would change nothing say so
(exit 2 or 1) instead of recording or resuming anything."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
from jobs_cli_support import CLI, jobs_json, teaparty
from local_repo import ENV, git, make_repo

from orchestrator.workspace.git import slug

pytestmark = pytest.mark.timeout(180)


def pasted(line: str, *, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run `line` as a shell would split it (`teaparty` being this checkout's CLI)."""
    argv = shlex.split(line)
    assert argv[0] == "teaparty", line
    return subprocess.run(
        [*CLI, *argv[1:]], capture_output=True, text=True, cwd=cwd, env=env, timeout=90
    )


def after(prefix: str, text: str) -> str:
    [line] = [line for line in text.splitlines() if line.lstrip().startswith(prefix)]
    return line.split(": ", 1)[1]


def test_the_printed_next_steps_work_pasted_from_anywhere(tmp_path: Path) -> None:
    """A parked job's two next steps, pasted in another directory by a person whose own
    state directory is elsewhere, answer and finish that job, not another."""
    repo = make_repo(tmp_path / "my widgets")
    home = tmp_path / "state dir"
    parked = teaparty("run", "--title", "Add docs", "--no-input", home=home, cwd=repo)
    assert parked.returncode == 4, parked.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**ENV, "HOME": str(elsewhere)}  # ~/.teaparty is not where the job is
    answer = after("answer it (yes or no)", parked.stderr).replace("ANSWER", "yes")
    answered = pasted(answer, cwd=elsewhere, env=env)
    assert answered.returncode == 0, answered.stderr
    go_on = after("the job goes on with", answered.stdout)
    assert go_on == after("then continue it", parked.stderr)
    finished = pasted(go_on, cwd=elsewhere, env=env)
    assert finished.returncode == 0, finished.stderr
    assert "job 1 resumed: branch teaparty/job-1-add-docs" in finished.stdout
    assert git(repo, "log", "--format=%s", "teaparty/job-1-add-docs", "--not", "main")
    assert not (elsewhere / ".teaparty").exists(), "no state directory made by the way"


def test_resuming_asks_for_a_job_that_can_go_on_as_it_was_asked(tmp_path: Path) -> None:
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    assert teaparty("run", "--title", "Add docs", "--yes", home=home, cwd=repo).returncode == 0
    retitled = teaparty("run", "--resume", "1", "--title", "Other", home=home, cwd=repo)
    assert (retitled.returncode, retitled.stderr) == (
        2,
        "teaparty run: --title is for a new job; --resume 1 continues that job as it was "
        "asked (leave out one or the other)\n",
    )
    done = teaparty("run", "--resume", "1", home=home, cwd=repo)
    assert done.returncode == 2
    assert done.stderr.endswith(
        "teaparty run: job 1 is done: its branch was teaparty/job-1-add-docs; nothing to resume\n"
    )


def test_cancelling_an_ended_job_records_nothing(tmp_path: Path) -> None:
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    assert teaparty("run", "--title", "Add docs", "--no-input", home=home, cwd=repo).returncode == 4
    assert teaparty("jobs", "cancel", "1", home=home).returncode == 0
    again = teaparty("jobs", "cancel", "1", home=home)
    assert (again.returncode, again.stderr) == (
        1,
        "teaparty jobs cancel: job 1 has already ended (cancelled): nothing to cancel\n",
    )
    assert [c["state"] for c in jobs_json("show", "1", home=home)["commands"]] == ["done"]


def test_a_bad_committed_project_file_is_a_configuration_error_and_starts_nothing(
    tmp_path: Path,
) -> None:
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    (repo / ".teaparty").mkdir()
    (repo / ".teaparty" / "project.yaml").write_text("budgt: 3\n")
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "project file")
    refused = teaparty("run", "--title", "Add docs", "--yes", home=home, cwd=repo)
    assert refused.returncode == 2
    assert "budgt: unknown key; did you mean 'budget'?" in refused.stderr
    assert jobs_json("list", home=home) == []
    checked = subprocess.run(
        [*CLI, "config", "check"], capture_output=True, text=True, cwd=repo, env=ENV
    )
    assert checked.returncode == 1, "config check here checks what the run refused"
    assert "project.yaml:1: budgt: unknown key" in checked.stderr


def test_a_demo_home_points_at_its_runs_state_directories(tmp_path: Path) -> None:
    demo_home = tmp_path / "demo"
    store = demo_home / "run-1" / "teaparty"
    repo = make_repo(tmp_path / "widgets")
    assert teaparty("run", "--title", "Add docs", "--yes", home=store, cwd=repo).returncode == 0
    listed = teaparty("jobs", "list", home=demo_home)
    assert listed.returncode == 0
    assert listed.stdout.splitlines() == [
        "no jobs",
        f"  {demo_home} holds the demo's runs, each with its own state directory:",
        f"  teaparty jobs list --home {store}",
    ]


@pytest.mark.parametrize(
    ("title", "wanted"),
    [
        ("Add a mul function to calc.py with a test", "add-a-mul-function-to-calc-py-with-a"),
        ("Add a multiplication function to calculator module", "add-a-multiplication-function-to"),
        ("x" * 50, "x" * 40),
        ("Fix it", "fix-it"),
        ("!!!", "job"),
    ],
)
def test_a_branch_slug_is_cut_between_words(title: str, wanted: str) -> None:
    assert slug(title) == wanted
