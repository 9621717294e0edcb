"""A repository's `setup:` as users meet it: local jobs on a real repository, under every
sandbox this host gives, whose environment is a virtualenv with pytest and a package no
host has (`tinylib`), installed from the repository's own wheelhouse (no index is reached).

The model plays the demo's roles on a plan of two tasks, each reviewed in full; every
worker and quality reviewer runs the project's test command first, and every worker looks
for the setup's secret. The store shows what they got: the tests passed, the secret was
not there. A second job of the project reuses the environment the first prepared.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import local_job
import pytest
from conftest import confined
from local_repo import ENV, git, make_repo
from wheelhouse import PYTEST, wheelhouse

from orchestrator.core.messages import AssistantTurn, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import JobStatus
from orchestrator.sandbox.confine import Sandbox
from orchestrator.setup.prepare import Outcome

SECRET_NAME = "TINY_INDEX_TOKEN"
SECRET = "s3tup-only-value-7d1e0a9"
TEST_COMMAND = "python -m pytest -q"
PROJECT = f"""humans: {{decider: dev}}
setup:
  commands:
    - python3 -m venv .venv
    - .venv/bin/pip install -q --no-index --find-links wheels -r requirements.txt
    - 'echo "token: ${{#{SECRET_NAME}}} characters"'
  key_files: [requirements.txt]
  secrets: [{SECRET_NAME}]
  test: {TEST_COMMAND}
"""
CALC = "def add(a, b):\n    return a + b\n"
TEST = """import tinylib
from calc import add


def test_add():
    assert tinylib.double(add(1, 2)) == 6
"""
_TASK = re.compile(r"#(\d+)")


class ScriptedTesters(DemoModel):
    """The demo's roles on a plan of two tasks reviewed in full, where every worker and
    quality reviewer first runs `test` with the shell tool, and every worker then looks for
    the variable `secret`."""

    def __init__(self, *, test: str, secret: str) -> None:
        super().__init__()
        self.test = test
        self.secret = secret

    def _lead(self, request: ModelRequest) -> AssistantTurn:
        done = {m.call_id: m.text for m in request.messages if m.role == "tool"}
        if not any(m.role == "assistant" for m in request.messages):
            title, body, _ = self._job(request)
            return AssistantTurn(
                tool_calls=tuple(
                    ToolCall(
                        f"task-{n}",
                        "task_create",
                        {"title": f"{title} {n}", "spec": _spec(n, title, body), "review": "full"},
                    )
                    for n in (1, 2)
                )
            )
        if "run-1" not in done:
            numbers = [_number(done[f"task-{n}"]) for n in (1, 2)]
            return AssistantTurn(
                tool_calls=tuple(
                    ToolCall(f"run-{n}", "dispatch", {"task": number, "brief": "As its spec says."})
                    for n, number in zip((1, 2), numbers, strict=True)
                )
            )
        return AssistantTurn(text="Done. " + " ".join(done[f"run-{n}"] for n in (1, 2)))

    def _worker(self, request: ModelRequest) -> AssistantTurn:
        done = {m.call_id for m in request.messages if m.role == "tool"}
        for call_id, command in (("tests", self.test), ("secret", f"printenv {self.secret}")):
            if call_id not in done:
                return _shell(call_id, command)
        return super()._worker(request)

    def _reviewer(self, request: ModelRequest) -> AssistantTurn:
        done = {m.call_id for m in request.messages if m.role == "tool"}
        if request.agent.rsplit("/", 1)[-1] == "quality-reviewer" and "tests" not in done:
            return _shell("tests", self.test)
        return super()._reviewer(request)


def _spec(n: int, title: str, body: str) -> str:
    """A spec the demo's worker and spec reviewer read (its path, title and issue)."""
    path = f"docs/requests/part-{n}.md"
    return (
        f"Record this request in {path} and commit it.\nTitle: {title} {n}\n\n"
        f"<issue>\n{body}\n</issue>\n\nAcceptance: {path} exists; the tests pass."
    )


def _number(text: str) -> int:
    found = _TASK.search(text)
    assert found is not None, text
    return int(found.group(1))


def _shell(call_id: str, command: str) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(call_id, "shell", {"command": command}),))


def calc_repo(path: Path) -> Path:
    """A person's repository: a module, its test, its requirements, a wheelhouse with them
    (and what pytest needs), a .gitignore and the project file with its `setup:`."""
    repo = make_repo(path)
    (repo / "calc.py").write_text(CALC)
    (repo / "test_calc.py").write_text(TEST)
    (repo / "requirements.txt").write_text("pytest\ntinylib\n")
    (repo / ".gitignore").write_text("__pycache__/\n")
    (repo / ".teaparty").mkdir()
    (repo / ".teaparty" / "project.yaml").write_text(PROJECT)
    wheelhouse(repo / "wheels", *PYTEST)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "calc")
    return repo


async def run_job(repo: Path, home: Path, sandbox: Sandbox, *, title: str) -> list[JobStatus]:
    """A local job of the project played by ScriptedTesters, with the setup's secret in the
    engine's environment; the statuses it showed."""
    env = {**ENV, "LANG": "C.UTF-8", SECRET_NAME: SECRET}
    model = ScriptedTesters(test=TEST_COMMAND, secret=SECRET_NAME)
    ran = await local_job.run_job(
        repo, home, sandbox, title=title, model=model, env=env, setup_secrets=(SECRET_NAME,)
    )
    return ran.statuses


def tool_results(home: Path, call_id: str) -> dict[str, list[str]]:
    """The results of every tool call named `call_id`, by the role of the agent that made it
    and in the order of its conversations."""
    with sqlite3.connect(home / "teaparty.db") as db:
        rows = db.execute(
            "SELECT c.agent, m.content FROM messages m JOIN conversations c"
            " USING (conversation_id) WHERE m.role = 'tool' ORDER BY c.rowid, m.seq"
        ).fetchall()
    found: dict[str, list[str]] = {}
    for agent, content in rows:
        result = json.loads(content)
        if result.get("call_id") == call_id:
            found.setdefault(agent.rsplit("/", 1)[-1], []).append(result["text"])
    return found


@pytest.fixture(params=["bwrap", "landlock"])
def setting(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A sandbox and a state directory the agents' users can reach (/tmp, 0711)."""
    for found, work in confined(request.param, f"setup-job-{tmp_path.name}"):
        yield found, work.parent


async def test_every_task_runs_the_projects_tests_in_the_prepared_environment(
    setting: tuple[Sandbox, Path], tmp_path: Path
) -> None:
    sandbox, home = setting
    repo = calc_repo(tmp_path / "calc")

    first = await run_job(repo, home, sandbox, title="Record the sums")
    tests = tool_results(home, "tests")
    assert sorted(tests) == ["implementer", "quality-reviewer"]
    for role, outputs in tests.items():
        assert len(outputs) == 2, f"{role}: one test run in each of the two tasks"
        for output in outputs:
            assert re.search(r"^1 passed\b", output, re.MULTILINE), output
            assert output.endswith("[exit code 0]"), output
    assert tool_results(home, "secret") == {"implementer": ["[exit code 1]"] * 2}
    [index] = (home / "setup" / "local" / "calc").glob("*.json")
    outcome = Outcome.from_json(index.read_text())
    assert outcome.ok
    assert outcome.paths == (".venv",)
    assert outcome.steps[-1].tail.strip() == f"token: {len(SECRET)} characters"
    assert {status.setup for status in first} == {outcome.summary()}
    assert first[-1].state == "done", "the final status shows the setup too"
    assert re.fullmatch(r"setup: prepared in \d+ s \(3 steps; \.venv\)", outcome.summary())
    branch = git(repo, "ls-tree", "-r", "--name-only", "teaparty/job-1-calc").splitlines()
    assert {"docs/requests/part-1.md", "docs/requests/part-2.md"} <= set(branch)
    assert not [p for p in branch if p.startswith((".venv", ".pytest_cache"))], branch

    second = await run_job(repo, home, sandbox, title="Record the sums again")
    assert {status.setup for status in second} == {"setup: reused (3 steps; .venv)"}, (
        "the second job reused the environment the first prepared"
    )
    tests = tool_results(home, "tests")
    assert {role: len(outputs) for role, outputs in tests.items()} == {
        "implementer": 4,
        "quality-reviewer": 4,
    }
    assert all(re.search(r"^1 passed\b", o, re.MULTILINE) for o in sum(tests.values(), []))
    assert tool_results(home, "secret") == {"implementer": ["[exit code 1]"] * 4}
    assert [p.name for p in (home / "setup" / "local" / "calc").glob("*.json")] == [index.name]
    for stored in home.glob("teaparty.db*"):
        assert SECRET.encode() not in stored.read_bytes(), stored.name
