"""The scripted job bench/cost.py bills: its repository, every role's replies, one real run.

Each task adds a `clamp_N` helper to its own module of a small Python package: the worker
reads the module and its tests, edits both, runs the tests, and replies; the spec reviewer
reads the diff; the quality reviewer reads the diff and runs the tests. On every fourth
task the worker's first version forgets the spec's ValueError and the quality reviewer
asks for it, so that task takes a second round. The phase reviewer reads the job's diff
stat. The tool results are real: files, diffs and test output from the task worktrees.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from teams_job import IDENTITY, call, results, run_git, sandbox_env, turn

from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.messages import AssistantTurn, Message, ToolCall
from orchestrator.core.model import Model, ModelRequest
from orchestrator.jobs.flat_lead import TRIAGE
from orchestrator.jobs.office import JobSource, Office
from orchestrator.sandbox.probe import probe
from orchestrator.teams.board import list_tasks

PROJECT = "widgets"
# The engine's own gates would make the bench measure waiting; the budget is lifted so the
# whole job is billed (a 50-task job passes the default $10).
PROJECT_TEXT = (
    "humans: {decider: alice}\nparallel: 3\ngates: {plan: never}\nbudget: {max_usd: null}\n"
)
# The whole suite, which the engine runs itself on each task's commit and the job branch
# (orchestrator/setup/checks.py) when the project names it.
CHECK_COMMAND = "python3 -m unittest discover -q -s tests -t ."
CHECKED_TEXT = PROJECT_TEXT + f"setup: {{test: {CHECK_COMMAND}}}\n"
FUNCTIONS = 12  # helpers a module starts with: about 3,000 characters
TESTED = 4  # of them tested: a test file of about 1,300 characters
FLAWED_EVERY = 4  # every fourth task needs a second review round
TASK = re.compile(r"Task #(\d+)")
REVIEW = re.compile(r"Review task #(\d+).*\(round (\d+) of")
SPAN = re.compile(r"`git diff (\S+)`")
Log = list[tuple[ModelRequest, AssistantTurn]]


# --- the repository ------------------------------------------------------------------------


def module_path(n: int) -> str:
    return f"widgets/m{n:03}.py"


def test_path(n: int) -> str:
    return f"tests/test_m{n:03}.py"


def test_command(n: int) -> str:
    return f"python3 -m unittest -v tests.test_m{n:03}"


def module_text(n: int) -> str:
    helpers = "".join(
        f"\n\ndef scale_{k}(values: list[float], factor: float = {k + 1}.0) -> list[float]:\n"
        f'    """Each value times `factor`, plus {n}: step {k} of widget {n}\'s pipeline."""\n'
        "    if not values:\n        return []\n"
        f"    return [value * factor + {n} for value in values]\n"
        for k in range(FUNCTIONS)
    )
    names = ", ".join(f'"scale_{k}"' for k in range(FUNCTIONS))
    head = f'"""Widget {n}: numeric helpers of the report pipeline."""\n\n'
    head += "from __future__ import annotations\n"
    return f"{head}{helpers}\n\n__all__ = [{names}]\n"


def test_text(n: int) -> str:
    cases = "".join(
        f"\n    def test_scale_{k}(self) -> None:\n"
        f"        self.assertEqual(m{n:03}.scale_{k}([1.0, 2.0]), "
        f"[{k + 1}.0 + {n}, {2 * (k + 1)}.0 + {n}])\n"
        for k in range(TESTED)
    )
    return (
        f'"""Tests of widgets.m{n:03}."""\n\nimport unittest\n\nfrom widgets import m{n:03}\n'
        f"\n\nclass TestWidget{n}(unittest.TestCase):{cases}\n    # end of tests\n"
    )


def make_repo(root: Path, tasks: int) -> Path:
    """A repository with one module and its tests per task, committed on main."""
    run_git(root.parent, "init", "-q", "-b", "main", str(root))
    files = {
        ".gitignore": "__pycache__/\n",
        "widgets/__init__.py": '"""The widgets package."""\n',
        "tests/__init__.py": "",
    }
    for n in range(1, tasks + 1):
        files[module_path(n)] = module_text(n)
        files[test_path(n)] = test_text(n)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    run_git(root, "add", "-A")
    run_git(root, "commit", "-qm", "widgets")
    return root


# --- what each role says -------------------------------------------------------------------


def spec_of(n: int) -> str:
    return (
        f"Add `clamp_{n}(values, low, high)` to {module_path(n)}: each value limited to "
        f"[low, high]; raise ValueError when low > high. Export it in __all__ and test both "
        f"behaviours in {test_path(n)}."
    )


def job_brief(tasks: int) -> str:
    """The job as the office manager hands it on; the flat agent starts from the same text."""
    lines = [f"Task {n}: {spec_of(n)}" for n in range(1, tasks + 1)]
    return f"Job: widgets issue 'Clamp helpers'. Do these {tasks} tasks:\n" + "\n".join(lines)


def clamp(n: int, *, checked: bool) -> str:
    check = "    if low > high:\n        raise ValueError(f'low {low} > high {high}')\n"
    return (
        f"\n\ndef clamp_{n}(values: list[float], low: float, high: float) -> list[float]:\n"
        '    """Each value limited to [low, high]."""\n'
        f"{check if checked else ''}"
        "    return [min(max(value, low), high) for value in values]\n"
    )


REJECTS = (
    "    def test_clamp_rejects_inverted_bounds(self) -> None:\n"
    "        with self.assertRaises(ValueError):\n"
    "            m{n:03}.clamp_{n}([1.0], 2.0, 1.0)\n\n"
)


def first_edits(n: int, *, flawed: bool) -> tuple[ToolCall, ToolCall]:
    """The worker's change: clamp_N and its test (the ValueError forgotten when flawed)."""
    tail = module_text(n).rsplit("\n\n", 1)[1]
    module = tail.replace("__all__ = [", f'__all__ = ["clamp_{n}", ')
    test = (
        "    def test_clamp(self) -> None:\n"
        f"        self.assertEqual(m{n:03}.clamp_{n}([-5.0, 0.5, 9.0], 0.0, 1.0),"
        " [0.0, 0.5, 1.0])\n\n" + ("" if flawed else REJECTS.format(n=n)) + "    # end of tests\n"
    )
    return (
        call(
            f"edit-{n}-m",
            "edit_file",
            path=module_path(n),
            old=tail,
            new=clamp(n, checked=not flawed).lstrip("\n") + "\n\n" + module,
        ),
        call(f"edit-{n}-t", "edit_file", path=test_path(n), old="    # end of tests\n", new=test),
    )


def fix_edits(n: int) -> tuple[ToolCall, ToolCall]:
    """The worker's answer to the review: the check, and its test."""
    line = "    return [min(max(value, low), high) for value in values]\n"
    return (
        call(
            f"fix-{n}-m",
            "edit_file",
            path=module_path(n),
            old=line,
            new=clamp(n, checked=True).split('"""\n', 1)[1],
        ),
        call(
            f"fix-{n}-t",
            "edit_file",
            path=test_path(n),
            old="    # end of tests\n",
            new=REJECTS.format(n=n) + "    # end of tests\n",
        ),
    )


def worker_reply(n: int, fixed: bool) -> str:
    if fixed:
        return (
            f"Addressed the review: clamp_{n} now raises ValueError when low > high, and "
            f"test_clamp_rejects_inverted_bounds covers it. Ran `{test_command(n)}`: all "
            "tests pass."
        )
    return (
        f"Added clamp_{n}(values, low, high) to {module_path(n)}: it limits each value to "
        f"[low, high] and is exported in __all__. Added test_clamp to {test_path(n)}. Ran "
        f"`{test_command(n)}`: all tests pass. No other file changed; nothing is left open."
    )


def last_calls(request: ModelRequest) -> tuple[str, ...]:
    """The names of the tool calls of the agent's last turn."""
    turns = [m for m in request.messages if m.role == "assistant" and m.tool_calls]
    return tuple(c.name for c in turns[-1].tool_calls) if turns else ()


@dataclass
class Script:
    """Every role's reply as a function of its transcript; keeps each request and reply."""

    tasks: int
    log: Log = field(default_factory=list)
    review: str = "full"  # the level the lead gives each task it plans

    def reply(self, request: ModelRequest) -> AssistantTurn:
        """The reply of the agent's role (its short name)."""
        role = request.agent.rsplit("/", 1)[-1]
        roles: dict[str, Callable[[ModelRequest], AssistantTurn]] = {
            "office-manager": self.office_manager,
            "project-lead": self.project_lead,
            "implementer": self.implementer,
            "spec-reviewer": self.reviewer,
            "quality-reviewer": self.reviewer,
            "phase-reviewer": self.phase_reviewer,
        }
        answer = roles[role](request)
        self.log.append((request, answer))
        return answer

    def office_manager(self, request: ModelRequest) -> AssistantTurn:
        done = results(request)
        if not done:
            return turn(call("om", "send", member=PROJECT, message=job_brief(self.tasks)))
        return turn(text=f"Job done. The project lead reported: {done[-1][:500]}")

    def project_lead(self, request: ModelRequest) -> AssistantTurn:
        if request.system == TRIAGE:  # is the job one change? (jobs/flat_lead.py)
            return turn(text="one" if self.tasks == 1 else "plan")
        done, numbers = results(request), range(1, self.tasks + 1)
        if not done:
            return turn(
                *(
                    call(
                        f"plan-{n}",
                        "task_create",
                        title=f"Add clamp_{n}",
                        spec=spec_of(n),
                        review=self.review,
                    )
                    for n in numbers
                )
            )
        if len(done) == self.tasks:
            return turn(
                *(
                    call(
                        f"go-{n}",
                        "dispatch",
                        task=n,
                        brief=f"Files: {module_path(n)}, {test_path(n)}. "
                        f"Tests: `{test_command(n)}`.",
                    )
                    for n in numbers
                )
            )
        return turn(text=f"All {self.tasks} tasks merged, each reviewed; the tests pass.")

    def implementer(self, request: ModelRequest) -> AssistantTurn:
        found = TASK.search(request.messages[0].text)
        assert found, request.messages[0].text
        n, fixing = int(found.group(1)), any(m.role == "user" for m in request.messages[1:])
        if request.messages[-1].role == "user":
            if not fixing:
                return turn(
                    call(f"read-{n}-m", "read_file", path=module_path(n)),
                    call(f"read-{n}-t", "read_file", path=test_path(n)),
                )
            return turn(*fix_edits(n))
        done = last_calls(request)
        if done == ("read_file", "read_file"):
            return turn(*first_edits(n, flawed=n % FLAWED_EVERY == 0))
        if done == ("edit_file", "edit_file"):
            test_id = f"test-{n}-{2 if fixing else 1}"
            return turn(call(test_id, "shell", command=test_command(n)))
        return turn(text=worker_reply(n, fixing))

    def reviewer(self, request: ModelRequest) -> AssistantTurn:
        briefs = [m for m in request.messages if REVIEW.search(m.text)]
        found, span = REVIEW.search(briefs[-1].text), SPAN.search(briefs[-1].text)
        assert found, briefs[-1].text
        assert span, briefs[-1].text
        n, round_number = int(found.group(1)), int(found.group(2))
        quality = request.agent.endswith("quality-reviewer")
        if request.messages[-1].role == "user":
            # What the reviewer still has to read: the diff, unless its brief holds it; the
            # tests, unless the engine ran them on this commit (the brief says how they fared).
            diff = call(f"diff-{n}-{round_number}", "shell", command=f"git diff {span.group(1)}")
            tests = call(f"run-{n}-{round_number}", "shell", command=test_command(n))
            wanted = () if "<diff>" in briefs[-1].text else (diff,)
            if quality and "Do not run these commands again" not in briefs[-1].text:
                wanted += (tests,)
            if wanted:
                return turn(*wanted)
        if quality and round_number == 1 and n % FLAWED_EVERY == 0:
            return turn(
                text=(
                    "request changes\n"
                    f"1. {module_path(n)}, clamp_{n}: the spec says to raise ValueError when "
                    "low > high; the function silently returns values clamped to an empty range. "
                    "Add the check, and a test that inverted bounds raise."
                )
            )
        what = "the tests pass and" if quality else "it meets the spec:"
        return turn(
            text=(
                f"approve\nclamp_{n} is correct and small; {what} the change touches only "
                f"{module_path(n)} and {test_path(n)}."
            )
        )

    def phase_reviewer(self, request: ModelRequest) -> AssistantTurn:
        if request.messages[-1].role == "user":
            span = SPAN.search(request.messages[-1].text)
            assert span, request.messages[-1].text
            return turn(call("stat", "shell", command=f"git diff --stat {span.group(1)}"))
        return turn(
            text=(
                f"approve\nThe job adds {self.tasks} clamp helpers, each with its tests, one "
                "module each; nothing outside widgets/ and tests/ changed."
            )
        )


# --- one job through the office ------------------------------------------------------------


async def run_job(home: Path, repo: Path, *, tasks: int, model: Model, checks: bool = True) -> int:
    """Run the scripted job of `tasks` tasks with `model` in a fresh `home`; its job id.

    With `checks`, the project names its test command, so the engine runs it on each task's
    commit and the job branch and the quality reviewer reads the result instead of running
    the tests; without, the quality reviewer runs them itself."""
    org = load_organisation(shipped_org_dir())
    text = CHECKED_TEXT if checks else PROJECT_TEXT
    project = load_project(text, org=org, source="project.yaml", default_name=PROJECT)
    env = {"PATH": os.environ["PATH"], **IDENTITY}
    sandbox = await probe({**env, **sandbox_env()}, home=home)
    office = await Office.open(
        home, org=org, projects=[project], models=lambda _: model, env=env, sandbox=sandbox
    )
    try:
        job = await office.start_here(
            project=PROJECT,
            key="widgets#1",
            title="Clamp helpers",
            project_text=text,
            brief=f"Issue #1: clamp helpers.\n\n{job_brief(tasks)}",
            source=JobSource(
                repo=PROJECT,
                source=str(repo),
                start="refs/remotes/origin/main",
                branch=lambda job_id: f"teaparty/job-{job_id}-clamp",
                slug="clamp",
            ),
        )
        result = await office.run(job, never)
        states = await office.engine.store.read(lambda tx: list_tasks(tx, job.job_id))
        # Every task's work is on the job branch (none reverted by a later task's commit).
        grep = ("grep", "-l", "def clamp_", job.space.branch, "--", "widgets")
        merged = len(run_git(job.space.repo, *grep).splitlines())
        await office.finish_job(job, result)
    finally:
        await office.close()
    assert [t.state for t in states] == ["done"] * tasks, states
    assert merged == tasks, f"{tasks - merged} task(s) lost from the job branch"
    return job.job_id


async def never(gate: object) -> str:
    raise AssertionError(f"no gate expected: {gate}")


def user(text: str) -> Message:
    """A message the flat agent is given."""
    return Message("flat", 0, "flat", "user", {"text": text})
