"""Every exit code the command line documents (each command's --help, docs/cli.md) is one a
real process ends with, in the case the documentation names, with the words it promises.

`SCENARIOS` holds, per (command, code), a way to make a real `teaparty` process end so; a
documented code without one, or one no longer documented, fails the first test.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import re
import sqlite3
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from jobs_cli_support import CLI, teaparty
from local_repo import ENV, git, make_repo
from terminal import Terminal

from bot.cli import main
from bot.config_cli import EXIT_CODES as CONFIG_CODES
from bot.errors import RUN_EXIT_CODES
from bot.jobs_cli import EXIT_CODES as JOBS_CODES
from bot.learnings_cli import EXIT_CODES as LEARNINGS_CODES

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parent.parent
Ended = tuple[int, str]  # the exit code, and what the process said (stdout and stderr)
Scenario = Callable[[Path], Ended]


def codes(text: str) -> set[int]:
    """The codes an "exit codes: 0 done, 1 ..." text names."""
    listed = re.split(r"[Ee]xit codes:", text, maxsplit=1)[1]
    return {int(code) for code in re.findall(r"(?:^|[:;,] ?)\s*(\d{1,3}) [a-z]", listed)}


def cli_md(section: str) -> str:
    """The "Exit codes:" paragraph of a `# teaparty ...` section of docs/cli.md."""
    text = (ROOT / "docs" / "cli.md").read_text()
    body = text.split(f"# `teaparty {section}`", 1)[1].split("\n# ", 1)[0]
    return next(p for p in body.split("\n\n") if p.startswith("Exit codes:"))


DOCUMENTED = {
    "run": codes(RUN_EXIT_CODES),
    "jobs": codes(JOBS_CODES) | codes(cli_md("jobs")),
    "learnings": codes(LEARNINGS_CODES) | codes(cli_md("learnings")),
    "config check": codes(CONFIG_CODES),
}


def ended(result: subprocess.CompletedProcess[str]) -> Ended:
    return result.returncode, result.stdout + result.stderr


def run_in(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Ended:
    """`teaparty ARGS` in a new repository, with the environment given (default: the suite's)."""
    repo = make_repo(tmp_path / "widgets")
    argv = [*CLI, *args]
    done = subprocess.run(
        argv, capture_output=True, text=True, cwd=repo, env=env or ENV, timeout=90
    )
    return ended(done)


def held(home: Path) -> int:
    """The store's engine lock, taken as a running teaparty holds it; the descriptor."""
    home.mkdir(parents=True, exist_ok=True)
    fd = os.open(home / "teaparty.db.lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


def parked(tmp_path: Path) -> tuple[Path, Path]:
    """A repository and a state directory with job 1 parked at its plan question."""
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    result = teaparty("run", "--title", "Add docs", "--no-input", home=home, cwd=repo)
    assert result.returncode == 4, result.stderr
    return repo, home


def interrupted(argv: list[str], cwd: Path, prompt: str) -> Ended:
    """Ctrl-C on a real terminal once `prompt` shows."""
    with Terminal(argv, cwd, ENV) as term:
        term.expect(prompt)
        term.send("\x03")
        return term.wait(), term.output


# --- teaparty run ---------------------------------------------------------------------


def run_delivered(tmp_path: Path) -> Ended:
    repo = make_repo(tmp_path / "widgets")
    return ended(teaparty("run", "--title", "Add docs", "--yes", home=tmp_path / "h", cwd=repo))


def run_failed(tmp_path: Path) -> Ended:
    repo = make_repo(tmp_path / "widgets")
    git(repo, "branch", "teaparty/job-1-break-it/keep")  # the job's branch cannot be made
    return ended(teaparty("run", "--title", "Break it", "--yes", home=tmp_path / "h", cwd=repo))


def run_bad_configuration(tmp_path: Path) -> Ended:
    broken = tmp_path / "org"
    broken.mkdir()
    (broken / "teaparty.yaml").write_text("budget: [\n")
    env = {**ENV, "TEAPARTY_CONFIG": str(broken)}
    return run_in(tmp_path, "run", "--title", "x", "--home", str(tmp_path / "h"), env=env)


def run_store_in_use(tmp_path: Path) -> Ended:
    fd = held(tmp_path / "h")
    try:
        return run_in(tmp_path, "run", "--title", "x", "--home", str(tmp_path / "h"))
    finally:
        os.close(fd)


def run_parked(tmp_path: Path) -> Ended:
    return run_in(tmp_path, "run", "--title", "x", "--no-input", "--home", str(tmp_path / "h"))


def run_interrupted(tmp_path: Path) -> Ended:
    repo = make_repo(tmp_path / "widgets")
    argv = [*CLI, "run", "--title", "Add docs", "--home", str(tmp_path / "h"), "--plain"]
    return interrupted(argv, repo, "your answer [yes/no]: ")


# --- teaparty jobs --------------------------------------------------------------------


def jobs_done(tmp_path: Path) -> Ended:
    return ended(teaparty("jobs", "list", home=tmp_path / "h"))


def jobs_failed(tmp_path: Path) -> Ended:
    _, home = parked(tmp_path)
    assert teaparty("jobs", "cancel", "1", home=home).returncode == 0
    return ended(teaparty("jobs", "cancel", "1", home=home))  # it has ended


def jobs_usage(tmp_path: Path) -> Ended:
    _, home = parked(tmp_path)
    return ended(teaparty("jobs", "answer", "1", "perhaps", home=home))


def jobs_store_in_use(tmp_path: Path) -> Ended:
    _, home = parked(tmp_path)
    fd = held(home)
    try:
        return ended(teaparty("jobs", "answer", "1", "yes", home=home))
    finally:
        os.close(fd)


def jobs_interrupted(tmp_path: Path) -> Ended:
    """Ctrl-C on a real terminal while following a parked job's log (it would go on)."""
    _, home = parked(tmp_path)
    argv = [*CLI, "jobs", "log", "1", "--follow", "--home", str(home)]
    return interrupted(argv, tmp_path, "-> dispatch")  # the log so far is out: it follows


# --- teaparty learnings ---------------------------------------------------------------


def learnings_done(tmp_path: Path) -> Ended:
    return run_in(tmp_path, "learnings", "list", "--home", str(tmp_path / "h"))


def learnings_usage(tmp_path: Path) -> Ended:
    return run_in(tmp_path, "learnings", "forget", "not-an-id", "--home", str(tmp_path / "h"))


def learnings_store_of_another_version(tmp_path: Path) -> Ended:
    home = tmp_path / "h"
    home.mkdir()
    with sqlite3.connect(home / "teaparty.db") as db:
        db.execute("PRAGMA user_version = 9999")
    return run_in(tmp_path, "learnings", "list", "--home", str(home))


def learnings_interrupted(tmp_path: Path) -> Ended:
    """Ctrl-C while it reads the repository. It reads for milliseconds, too short to
    interrupt from outside without a race, so the reading is made to be interrupted here, in
    the process, where the command's own handling of Ctrl-C is what answers."""
    repo = make_repo(tmp_path / "widgets")

    async def interrupted_reading(path: Path) -> Path | None:
        raise KeyboardInterrupt

    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(out):
        patch.setattr("orchestrator.api.repository_top", interrupted_reading)
        patch.chdir(repo)
        with contextlib.redirect_stderr(err):
            code = main(["learnings", "list", "--home", str(tmp_path / "h")], environ={})
    return code, out.getvalue() + err.getvalue()


# --- teaparty config check ------------------------------------------------------------


def config_fine(tmp_path: Path) -> Ended:
    return run_in(tmp_path, "config", "check")


def config_issues(tmp_path: Path) -> Ended:
    repo = make_repo(tmp_path / "widgets")
    (repo / ".teaparty").mkdir()
    (repo / ".teaparty" / "project.yaml").write_text("budgt: 3\n")
    return ended(
        subprocess.run([*CLI, "config", "check"], capture_output=True, text=True, cwd=repo, env=ENV)
    )


def config_missing(tmp_path: Path) -> Ended:
    return run_in(tmp_path, "config", "check", str(tmp_path / "nowhere"))


SCENARIOS: dict[tuple[str, int], tuple[Scenario, str]] = {
    ("run", 0): (run_delivered, "result: "),
    ("run", 1): (run_failed, "teaparty run: "),
    ("run", 2): (run_bad_configuration, "teaparty.yaml"),
    ("run", 3): (run_store_in_use, "is in use by another teaparty process"),
    ("run", 4): (run_parked, "teaparty jobs answer 1 ANSWER"),
    ("run", 130): (run_interrupted, "Job 1 is saved; continue it with: teaparty run --repo"),
    ("jobs", 0): (jobs_done, "no jobs"),
    ("jobs", 1): (jobs_failed, "job 1 has already ended (cancelled): nothing to cancel"),
    ("jobs", 2): (jobs_usage, "gate 1 takes yes or no, not 'perhaps'"),
    ("jobs", 3): (jobs_store_in_use, "is in use by another teaparty process"),
    ("jobs", 130): (jobs_interrupted, ""),
    ("learnings", 0): (learnings_done, "no learnings at HEAD"),
    ("learnings", 2): (learnings_usage, "'not-an-id' is not a learning's id"),
    ("learnings", 3): (learnings_store_of_another_version, "teaparty learnings list: "),
    ("learnings", 130): (learnings_interrupted, ""),
    ("config check", 0): (config_fine, "ok: "),
    ("config check", 1): (config_issues, "budgt: unknown key; did you mean 'budget'?"),
    ("config check", 2): (config_missing, "no such file or directory"),
}


def test_every_documented_exit_code_has_a_scenario_and_no_other() -> None:
    assert all(DOCUMENTED.values()), f"a command documents no exit code: {DOCUMENTED}"
    documented = {(command, code) for command, found in DOCUMENTED.items() for code in found}
    assert documented == set(SCENARIOS)


@pytest.mark.parametrize(("command", "code"), sorted(SCENARIOS), ids=lambda v: str(v))
def test_a_real_process_ends_with_each_documented_code(
    command: str, code: int, tmp_path: Path
) -> None:
    scenario, words = SCENARIOS[command, code]
    status, said = scenario(tmp_path)
    assert status == code, said
    assert words in said
    assert "Traceback" not in said


def test_json_was_asked_for_so_failures_are_json_too(tmp_path: Path) -> None:
    """A script that asked for JSON finds the failure in JSON on standard output; a person
    still reads it on standard error."""
    home = tmp_path / "h"
    missing = teaparty("jobs", "show", "9", "--json", home=home)
    assert missing.returncode == 1
    assert json.loads(missing.stdout) == {
        "error": {
            "command": "teaparty jobs show",
            "message": "no job 9 in this state directory",
            "exit_code": 1,
        }
    }
    assert missing.stderr == "teaparty jobs show: no job 9 in this state directory\n"
    misspelt = teaparty("jobs", "show", "nine", "--json", home=home)
    assert misspelt.returncode == 2
    assert json.loads(misspelt.stdout)["error"] == {
        "command": "teaparty jobs show",
        "message": "argument ID: invalid int value: 'nine'",
        "exit_code": 2,
    }
    assert "usage: teaparty jobs show" in misspelt.stderr
