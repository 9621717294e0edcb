"""The engine runs the project's checks itself, as users meet it: local jobs on a real
repository, in a real sandbox, played by a scripted organisation.

A worker whose first change breaks a test is caught by the engine's own run before anyone
reviews it; it fixes the change from the failure it is sent; the reviewers read the passing
result in their brief; the pull request is written with the passing run of the very commit
it carries. A test command that cannot run (its tool is missing) is said to have not run,
on the tracking comment and the pull request, and nothing is reported as passed.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import local_job
import pytest
from conftest import confined
from local_repo import git, make_repo

from bot.github.outbound import Outbound
from bot.github.tracking import pull_body, tracking_body
from orchestrator.core.messages import AssistantTurn, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.offline import DemoModel
from orchestrator.sandbox.confine import Sandbox
from orchestrator.setup.checks import Checked

CALC = "def add(a, b):\n    return a + b\n"
BROKEN = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
TESTS = """import unittest

from calc import add


class Add(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(1, 2), 3)
"""
AGENT = Outbound("local", "calc", 1)


class BreaksThenFixes(DemoModel):
    """The demo's roles, where the worker's first change breaks `add` and its second, once
    the engine's checks came back failing, mends it."""

    def _worker(self, request: ModelRequest) -> AssistantTurn:
        done = {m.call_id for m in request.messages if m.role == "tool"}
        told = " ".join(m.text for m in request.messages if m.role == "user")
        if "break" not in done:
            return _write("break", BROKEN)
        if "the project's checks fail" in told and "fix" not in done:
            return _write("fix", FIXED)
        return AssistantTurn(text="Added mul to calc.py.")


def _write(call_id: str, content: str) -> AssistantTurn:
    call = ToolCall(call_id, "write_file", {"path": "calc.py", "content": content})
    return AssistantTurn(tool_calls=(call,))


def calc_repo(path: Path, *, test: str) -> Path:
    """A repository with a module, its unittest test, and a project whose only setup is
    its test command (the host's python3 runs it: no environment to prepare)."""
    repo = make_repo(path)
    (repo / "calc.py").write_text(CALC)
    (repo / "test_calc.py").write_text(TESTS)
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / ".teaparty").mkdir()
    project = f"humans: {{decider: dev}}\nsetup:\n  test: {test}\n"
    (repo / ".teaparty" / "project.yaml").write_text(project)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return repo


@pytest.fixture(params=["bwrap", "landlock"])
def setting(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A sandbox and a state directory the agents' users can reach (/tmp, 0711)."""
    for found, work in confined(request.param, f"checks-{tmp_path.name}"):
        yield found, work.parent


async def _add_mul(repo: Path, home: Path, sandbox: Sandbox) -> local_job.Ran:
    """A local job on `repo` asked to add a mul function, whose worker first breaks `add`."""
    return await local_job.run_job(
        repo, home, sandbox, title="Add a mul function", model=BreaksThenFixes()
    )


def _checks(home: Path) -> list[tuple[int | None, str, Checked]]:
    with sqlite3.connect(home / "teaparty.db") as db:
        rows = db.execute("SELECT task, status, record FROM checks ORDER BY check_id").fetchall()
    return [(task, status, Checked.from_json(record)) for task, status, record in rows]


def _briefs(home: Path, role: str) -> list[str]:
    """The first message of each conversation of agents named `role`."""
    with sqlite3.connect(home / "teaparty.db") as db:
        rows = db.execute(
            "SELECT m.content FROM messages m JOIN conversations c USING (conversation_id)"
            " WHERE c.agent LIKE ? AND m.role = 'user' ORDER BY m.message_id",
            (f"%/{role}",),
        ).fetchall()
    return [json.loads(content)["text"] for (content,) in rows]


async def test_a_broken_change_is_caught_fixed_and_its_passing_run_is_on_the_pull_request(
    setting: tuple[Sandbox, Path], tmp_path: Path
) -> None:
    sandbox, home = setting
    repo = calc_repo(tmp_path / "calc", test="python3 -m unittest -q")

    ran = await _add_mul(repo, home, sandbox)

    checks = _checks(home)
    assert [(task, status) for task, status, _ in checks] == [
        (1, "failed"),
        (1, "passed"),
        (None, "passed"),
    ], "the broken commit failed, its fix passed, then the job branch passed"
    failed = checks[0][2]
    assert failed.runs[0].exit_code == 1
    assert "FAILED (failures=1)" in failed.runs[0].tail
    assert "AssertionError: -1 != 3" in failed.runs[0].tail
    worker = " ".join(_briefs(home, "implementer"))
    assert "the project's checks fail on your commit" in worker
    assert "AssertionError: -1 != 3" in worker, "the worker read the failing output"
    [review] = _briefs(home, "spec-reviewer")
    assert "test `python3 -m unittest -q` passed (1 run)" in review, review
    assert "the project's checks fail" not in review, "nobody reviewed the broken commit"

    [delivered] = ran.delivered
    head = git(repo, "rev-parse", "teaparty/job-1-calc").strip()
    assert delivered.checks[-1].task is None
    assert delivered.checks[-1].checked.commit == head, "the PR's check is of its own commit"
    body = pull_body(delivered, agent=AGENT)
    assert f"sandbox on `{head[:12]}`, this pull request's commit): ✅ passed" in body
    assert "- test `python3 -m unittest -q` passed (1 run) in " in body
    assert git(repo, "show", "teaparty/job-1-calc:calc.py") == FIXED
    comment = tracking_body(ran.statuses[-1], branch_url=None, trigger_label="t", agent=AGENT)
    assert f"- task #1 `{checks[1][2].commit[:12]}`: ✅ passed" in comment
    assert f"- job branch `{head[:12]}`: ✅ passed" in comment
    assert any("checks on " in line and "passed" in line for line in ran.lines), ran.lines


async def test_a_test_command_that_cannot_run_is_said_never_passed(
    setting: tuple[Sandbox, Path], tmp_path: Path
) -> None:
    sandbox, home = setting
    repo = calc_repo(tmp_path / "calc", test="no-such-test-runner --all")

    ran = await _add_mul(repo, home, sandbox)

    statuses = {status for _, status, _ in _checks(home)}
    assert statuses == {"not run"}
    [delivered] = ran.delivered
    body = pull_body(delivered, agent=AGENT)
    assert "⚠️ could not run" in body
    assert "exit 127: a command was not found" in body
    assert "No check is reported as passed" in body
    assert "✅" not in body
    assert "passed" not in body.replace("reported as passed", "")
    comment = tracking_body(ran.statuses[-1], branch_url=None, trigger_label="t", agent=AGENT)
    assert "⚠️ could not run" in comment
    assert "no-such-test-runner: command not found" in comment, "the output says why"


async def test_a_project_without_a_test_command_says_so_on_its_pull_request(
    setting: tuple[Sandbox, Path], tmp_path: Path
) -> None:
    sandbox, home = setting
    repo = make_repo(tmp_path / "calc")
    (repo / "calc.py").write_text(CALC)
    (repo / ".teaparty").mkdir()
    (repo / ".teaparty" / "project.yaml").write_text("humans: {decider: dev}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")

    ran = await _add_mul(repo, home, sandbox)

    [delivered] = ran.delivered
    assert delivered.checks == ()
    body = pull_body(delivered, agent=AGENT)
    assert "**Checks:** ⚠️ none ran: the project names no test command" in body
    assert "**Checks:** ⚠️ none ran: the project names no test command" in tracking_body(
        ran.statuses[-1], branch_url=None, trigger_label="t", agent=AGENT
    )
    assert not _checks(home)
    assert any("no check ran: the project names no test command" in x for x in ran.lines)
