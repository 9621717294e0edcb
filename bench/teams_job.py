"""The scripted job bench/teams.py measures: its model, its repository, its timed git."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator.agents.ports import ToolRunner
from orchestrator.agents.toolbox import Toolbox
from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.messages import AssistantTurn, ToolCall, ToolResult
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.office import JobSource, Office
from orchestrator.models.scripted import FunctionModel
from orchestrator.sandbox.probe import probe
from orchestrator.teams import tools as team_tools
from orchestrator.teams.board import list_tasks
from orchestrator.workspace import git as worktrees
from orchestrator.workspace import layout as workspace
from orchestrator.workspace import marks

PROJECT = "widgets"


def sandbox_env() -> dict[str, str]:
    """TEAPARTY_SANDBOX* from this process's environment (bench/sandbox.py sets it)."""
    return {k: v for k, v in os.environ.items() if k.startswith("TEAPARTY_SANDBOX")}


IDENTITY = {f"GIT_{who}_NAME": "bench" for who in ("AUTHOR", "COMMITTER")} | {
    f"GIT_{who}_EMAIL": "bench@example.com" for who in ("AUTHOR", "COMMITTER")
}
FILES_PER_DIR = 50
TASK = re.compile(r"Task #(\d+)")
Log = list[tuple[ModelRequest, AssistantTurn]]


# --- the scripted organisation -------------------------------------------------------------


def task_path(number: int) -> str:
    return f"tasks/task-{number:03}.md"


def task_spec(number: int) -> str:
    return f"Create {task_path(number)} containing the line `task {number}`, and commit it."


def job_brief(tasks: int) -> str:
    """The job as the office manager hands it on; the flat agent starts from the same text."""
    lines = [f"Task {n}: {task_spec(n)}" for n in range(1, tasks + 1)]
    return f"Job: widgets issue 'Task files'. Do these {tasks} tasks:\n" + "\n".join(lines)


def results(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "tool"]


def call(call_id: str, name: str, **args: object) -> ToolCall:
    return ToolCall(call_id, name, args)


def turn(*calls: ToolCall, text: str = "") -> AssistantTurn:
    return AssistantTurn(text=text, tool_calls=calls)


@dataclass
class Script:
    """Every role's reply as a function of its transcript; keeps each request and reply."""

    tasks: int
    review: str
    log: Log = field(default_factory=list)

    def reply(self, request: ModelRequest) -> AssistantTurn:
        """The reply of the agent's role; spec, quality and phase reviewers approve at once."""
        role = request.agent.rsplit("/", 1)[-1]
        if role == "office-manager":
            answer = self.office_manager(request)
        elif role == "project-lead":
            answer = self.project_lead(request)
        elif role == "implementer":
            answer = self.implementer(request)
        else:
            answer = turn(text="approve\nMeets the spec: the one file, committed.")
        self.log.append((request, answer))
        return answer

    def office_manager(self, request: ModelRequest) -> AssistantTurn:
        done = results(request)
        if not done:
            return turn(call("om", "send", member=PROJECT, message=job_brief(self.tasks)))
        return turn(text=f"Job done. The project lead reported: {done[-1]}")

    def project_lead(self, request: ModelRequest) -> AssistantTurn:
        done, numbers = results(request), range(1, self.tasks + 1)
        if not done:
            return turn(*(self._create(n) for n in numbers))
        if len(done) == self.tasks:  # all created: dispatch them all in one turn
            brief = "The file goes under tasks/ at the repository root."
            return turn(*(call(f"go-{n}", "dispatch", task=n, brief=brief) for n in numbers))
        return turn(text=f"All {self.tasks} tasks merged; each added its tasks/ file.")

    def _create(self, number: int) -> ToolCall:
        title, spec = f"Add task file {number}", task_spec(number)
        return call(f"plan-{number}", "task_create", title=title, spec=spec, review=self.review)

    def implementer(self, request: ModelRequest) -> AssistantTurn:
        found = TASK.search(request.messages[0].text)
        assert found, request.messages[0].text
        n, done = int(found.group(1)), results(request)
        if not done:
            return turn(call("w", "write_file", path=task_path(n), content=f"task {n}\n"))
        if len(done) == 1:
            return turn(call("c", "shell", command="git status --short"))
        if not done[-1].endswith("[exit code 0]"):
            return turn(text=f"blocked: git status failed: {done[-1]}")
        return turn(
            text=f"Task {n} done on its branch: added {task_path(n)} with the single line "
            "the spec asks for. No other file changed; the file has no tests, so none were "
            "run. Nothing is left open."
        )


# --- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """One measured call: what it was, when it started, how long it took."""

    what: str
    started: float
    seconds: float


def git_label(repo: Path | None, args: Sequence[str], work_tree: Path | None = None) -> str:
    """`command@place`, e.g. `reset@slot`; place is slot, job (worktree or repo) or mirror."""
    words = list(args)
    while words[:1] == ["-c"]:
        words = words[2:]
    command = " ".join(words[:2]) if words[:1] == ["worktree"] else (words or ["git"])[0]
    parts = (work_tree or repo or Path("/")).parts
    place = "slot" if "slots" in parts else "job" if "jobs" in parts else "mirror"
    return f"{command}@{place}"


@contextlib.contextmanager
def timing_git(calls: list[Timed]) -> Iterator[None]:
    """Time every git subprocess of the engine: the `git` of worktrees, workspace, team_tools."""
    original = worktrees.git

    async def timed(repo: Path | None, *args: str, **options: Any) -> tuple[int, str]:
        started = time.perf_counter()
        try:
            return await original(repo, *args, **options)
        finally:
            label = git_label(repo, args, options.get("work_tree"))
            calls.append(Timed(label, started, time.perf_counter() - started))

    # workspace, marks and team_tools import the name `git`: each module's binding is replaced.
    worktrees.git = workspace.git = marks.git = team_tools.git = timed  # type: ignore[attr-defined]
    try:
        yield
    finally:
        worktrees.git = workspace.git = marks.git = team_tools.git = original  # type: ignore[attr-defined]


@dataclass
class TimedRunner:
    """A ToolRunner that times the calls it hands on to `inner`."""

    inner: ToolRunner
    calls: list[Timed]

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        """Run the call with `inner` and record how long it took."""
        started = time.perf_counter()
        try:
            return await self.inner.run(agent, conversation_id, call)
        finally:
            self.calls.append(Timed(call.name, started, time.perf_counter() - started))


def seconds(calls: Sequence[Timed]) -> float:
    return sum(c.seconds for c in calls)


def run_git(repo: Path, *args: str, stdin: bytes | None = None) -> str:
    env = {**os.environ, **IDENTITY}
    done = subprocess.run(
        ["git", "-C", str(repo), *args], input=stdin, check=True, capture_output=True, env=env
    )
    return done.stdout.decode()


def make_repo(path: Path, files: int) -> Path:
    """A bare repository whose one commit holds `files` small files, FILES_PER_DIR a directory.

    Written by git fast-import, so no file is created on disk: on a slow filesystem that
    would cost as much as the checkouts being measured.
    """
    run_git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))
    stream = bytearray()
    for n in range(files):
        text = f'"""Module {n}."""\n\nVALUE_{n} = {n}\n'.encode()
        stream += b"blob\nmark :%d\ndata %d\n%s\n" % (n + 1, len(text), text)
    stream += b"commit refs/heads/main\ncommitter bench <b@example.com> 1767225600 +0000\n"
    stream += b"data 5\ninit\n"
    for n in range(files):
        name = f"src/d{n // FILES_PER_DIR:04}/m{n % FILES_PER_DIR:02}.py"
        stream += b"M 100644 :%d %s\n" % (n + 1, name.encode())
    run_git(path, "fast-import", "--quiet", stdin=bytes(stream))
    return path


# --- one job through the office ------------------------------------------------------------


@dataclass
class JobRun:
    """One job: when each phase ran, the engine's git calls, the worker's tool calls."""

    tasks: int
    script: Script
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)
    gits: list[Timed] = field(default_factory=list)
    tools: list[Timed] = field(default_factory=list)

    def seconds(self, phase: str) -> float:
        start, end = self.phases[phase]
        return end - start

    def gits_in(self, phase: str) -> list[Timed]:
        start, end = self.phases[phase]
        return [g for g in self.gits if start <= g.started < end]


async def run_job(home: Path, repo: Path, *, tasks: int, review: str, parallel: int) -> JobRun:
    """Run the scripted job in a fresh state directory `home`; check every task is merged."""
    org = load_organisation(shipped_org_dir())
    text = f"humans: {{decider: alice}}\nparallel: {parallel}\ngates: {{plan: never}}\n"
    project = load_project(text, org=org, source="project.yaml", default_name=PROJECT)
    measured = JobRun(tasks, Script(tasks, review))
    model = FunctionModel(measured.script.reply)
    env = {"PATH": os.environ["PATH"], **IDENTITY}
    sandbox = await probe({**env, **sandbox_env()}, home=home)
    office = await Office.open(
        home, org=org, projects=[project], models=lambda _: model, env=env, sandbox=sandbox
    )
    try:
        toolbox = office.engine.scheduler.runner.tools
        assert isinstance(toolbox, Toolbox)
        for name in ("write_file", "shell"):  # only workers call them in this job
            toolbox.runners[name] = TimedRunner(toolbox.runners[name], measured.tools)
        with timing_git(measured.gits):
            merges = await drive(office, repo, measured.phases)
        states = await office.engine.store.read(lambda tx: list_tasks(tx, 1))
    finally:
        await office.close()
    assert [t.state for t in states] == ["done"] * tasks, states
    assert merges == tasks, (merges, tasks)
    return measured


async def drive(office: Office, repo: Path, phases: dict[str, tuple[float, float]]) -> int:
    """start_job, run and finish_job, each timed into `phases`; the job branch's merges."""
    marks = [time.perf_counter()]
    job = await office.start_here(
        project=PROJECT,
        key="widgets#1",
        title="Task files",
        brief="Issue #1: task files.",
        source=JobSource(
            repo=PROJECT,
            source=str(repo),
            start="refs/remotes/origin/main",
            branch=lambda job_id: f"teaparty/job-{job_id}-task-files",
            slug="task-files",
        ),
    )
    marks.append(time.perf_counter())
    result = await office.run(job, never)
    marks.append(time.perf_counter())
    await office.finish_job(job, result)
    marks.append(time.perf_counter())
    phases.update(zip(("start", "run", "finish"), itertools.pairwise(marks), strict=True))
    span = f"{job.space.base}..{job.space.branch}"
    return int(run_git(job.space.repo, "rev-list", "--count", "--merges", span))


async def never(gate: object) -> str:
    raise AssertionError(f"no gate expected: {gate}")


# --- 1. overhead ---------------------------------------------------------------------------
