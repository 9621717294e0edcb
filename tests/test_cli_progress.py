"""Live progress of `teaparty run`: a panel on a terminal, one line per event elsewhere.

Each model call is slowed (tests/slow_run.py) so the job is watched while it works.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from local_repo import ENV, make_repo
from terminal import Terminal, screen

from bot.progress import Lines, LivePanel, elapsed
from orchestrator.api import JobStatus, Member, Progress, Task, Team
from orchestrator.core.messages import Usage

pytestmark = pytest.mark.timeout(120)
SLOW_RUN = str(Path(__file__).with_name("slow_run.py"))
COLOUR = "\x1b[1;35m"  # the state, bold magenta
HIDE_CURSOR = "\x1b[?25l"  # what a live panel does first


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


def argv(tmp_path: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        SLOW_RUN,
        "0.3",
        "run",
        "--title",
        "Add docs",
        "--yes",
        "--model",
        "scripted",
        "--home",
        str(tmp_path / "home"),
        *extra,
    ]


@pytest.mark.parametrize("no_color", [False, True])
def test_a_terminal_shows_a_live_panel_of_phase_tasks_and_teams(
    repo: Path, tmp_path: Path, no_color: bool
) -> None:
    env = {**ENV, "TERM": "xterm-256color", "COLUMNS": "120"}
    if no_color:
        env["NO_COLOR"] = "1"
    with Terminal(argv(tmp_path), repo, env) as term:
        term.expect("implementer*")  # a member of the task's mini-team, busy
        assert term.wait() == 0, term.output
    assert HIDE_CURSOR in term.output
    assert "job 1 working · working on #1 Add docs · 0:0" in _text(term.output)
    assert "tokens · $0.0000" in term.output
    assert "#1 in progress Add docs  implementer*" in _text(term.output)
    assert (COLOUR in term.output) is not no_color
    assert "result: Done." in term.output  # the panel gives way to the outcome


def test_a_pipe_gets_one_line_per_event(repo: Path, tmp_path: Path) -> None:
    run = subprocess.run(
        argv(tmp_path), capture_output=True, text=True, cwd=repo, env=ENV, timeout=90
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    events = [line.strip() for line in lines if line.startswith("  #1 ")]
    assert events[:4] == [
        "#1 Add docs: to do (0 tokens · $0.0000)",
        "#1 Add docs: in progress (0 tokens · $0.0000)",
        "#1 team: implementer",
        "#1 Add docs: in review (0 tokens · $0.0000)",
    ]
    assert "#1 Add docs: done (0 tokens · $0.0000)" in events
    assert "\x1b" not in run.stdout


def test_plain_on_a_terminal_prints_lines_without_a_panel(repo: Path, tmp_path: Path) -> None:
    with Terminal(argv(tmp_path, "--plain"), repo, {**ENV, "TERM": "xterm"}) as term:
        assert term.wait() == 0, term.output
    assert "  #1 Add docs: in progress (0 tokens · $0.0000)" in term.output
    assert HIDE_CURSOR not in term.output


@pytest.mark.parametrize("keys", ["yes\n", "\x03"])
def test_what_is_printed_at_a_question_stays_when_the_panel_comes_back_or_closes(
    repo: Path, tmp_path: Path, keys: str
) -> None:
    """The proxy's suggestion and the prompt with its answer stay in the scrollback, both
    when the panel comes back after the answer and when Ctrl-C at the prompt closes it."""
    env = {**ENV, "TERM": "xterm-256color", "COLUMNS": "120"}
    home = str(tmp_path / "home")
    run = [sys.executable, "-m", "bot.cli", "run", "--title", "Add docs", "--home", home]
    with Terminal([*run, "--model", "scripted"], repo, env) as term:
        term.expect("your answer [yes/no]: ")
        term.send(keys)
        code = term.wait()
    shown = screen(term.output, width=120)
    assert code == (0 if keys == "yes\n" else 130), term.output
    assert any(line.startswith("  the proxy suggests: yes (") for line in shown), shown
    answered = "your answer [yes/no]: " + ("yes" if keys == "yes\n" else "^C")
    assert answered in shown, "\n".join(shown)
    if keys == "yes\n":
        assert "  root answered: yes" in shown or any(
            line.endswith(" answered: yes") for line in shown
        ), shown
        assert "result: Done." in "\n".join(shown)
    else:
        assert any(line.startswith("interrupted. Job 1 is saved;") for line in shown), shown


def _text(output: str) -> str:
    """What the terminal shows, escape sequences taken out."""
    import re

    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output)


def status(**changes: object) -> JobStatus:
    task = Task(1, "Add docs", "", "coding", "reviewed", "in_progress", None, None, (), "lead")
    fields: dict[str, object] = {
        "job_id": 7,
        "title": "Add docs",
        "state": "working",
        "step": "working on #1 Add docs",
        "tasks": (task,),
        "usage": Usage(1_000, 234),
        "cost_usd": 0.0123,
        "branch": "teaparty/job-7-add-docs",
    }
    return JobStatus(**(fields | changes))  # type: ignore[arg-type]


def test_the_panel_names_the_lead_the_team_and_what_the_job_waits_for() -> None:
    from rich.console import Console

    panel = LivePanel.__new__(LivePanel)  # rendering alone: no live display started
    panel.started = 0.0
    panel.progress = None
    console = Console(record=True, width=120, no_color=True)
    console.print(panel.render())
    assert "starting" in console.export_text()
    teams = (
        Team(None, (Member("widgets/project-lead", False),)),
        Team(1, (Member("widgets/coding/implementer", True), Member("w/c/spec-reviewer", False))),
    )
    waiting = "waiting for the model, which is unavailable; trying again at 12:00:00 UTC"
    panel.progress = Progress(status(waiting=waiting), teams, at=0.0)
    console.print(panel.render())
    text = console.export_text()
    assert "job 7 working · working on #1 Add docs" in text
    assert "1,234 tokens · $0.0123" in text
    assert "lead: project-lead" in text
    assert "#1 in progress Add docs  implementer*, spec-reviewer" in text
    assert waiting in text


def test_lines_say_each_change_once(capsys: pytest.CaptureFixture[str]) -> None:
    lines = Lines()
    team = (Team(1, (Member("w/c/implementer", True),)),)
    for _ in range(3):
        lines.update(Progress(status(), team, at=0.0))
    assert capsys.readouterr().out.splitlines() == [
        "  #1 Add docs: in progress (1,234 tokens · $0.0123)",
        "  #1 team: implementer",
    ]


def test_elapsed_reads_like_a_clock() -> None:
    assert [elapsed(s) for s in (0, 61.9, 3_725, -1)] == ["0:00", "1:01", "1:02:05", "0:00"]
