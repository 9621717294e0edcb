"""Benchmark of jobs run by mini-teams on a real git repository, measured in one run.

    python bench/teams.py [--quick] [--files N] [--tasks T] [--sizes 5,20,50]

1. Overhead: a scripted organisation (zero-latency model) runs one job of T independent
   tasks, review `none`, on a generated repository of N files: office manager -> project
   lead, who creates the tasks and dispatches them all -> per task a mini-team whose worker
   writes one file and commits it with the shell tool -> the engine merges. Wall time per
   task is split into the engine's own git subprocesses, the worker's tools, and the rest
   (the engine). Baseline, on a copy of the same repository in the same run: raw git per
   task (worktree add -b, write, add + commit, merge --no-ff in a job-branch checkout,
   worktree remove). One-time costs (mirror clone, job worktree, first slot) apart.
2. Context: the same organisation with review `full` on a small repository, for jobs of
   5, 20 and 50 tasks: the peak estimated context of the project lead, worker and
   reviewers, beside a flat agent whose one conversation holds every task's brief, tool
   calls and results, and every review verdict.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator import team_tools, workspace, worktrees
from orchestrator.board import RESULT_MAX, list_tasks
from orchestrator.config import load_organisation, load_project, shipped_org_dir
from orchestrator.context import estimate_tokens
from orchestrator.jobs import JobHandle, Office
from orchestrator.messages import AssistantTurn, Message, ToolCall, ToolResult, assistant_content
from orchestrator.ports import ModelRequest, ToolRunner
from orchestrator.scripted import FunctionModel
from orchestrator.toolbox import Toolbox

PROJECT = "widgets"
IDENTITY = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}
FILES_PER_DIR = 50
WORKER_TOOLS = ("write_file", "shell")
TASK = re.compile(r"Task #(\d+)")
# Of the time the engine spends in git during a job, these run once per job (or per slot).
MIRROR_GIT = frozenset({"clone", "config", "fetch"})


# --- the scripted organisation -------------------------------------------------------------


def task_path(number: int) -> str:
    return f"tasks/task-{number:03}.md"


def task_spec(number: int) -> str:
    return f"Create {task_path(number)} containing the line `task {number}`, and commit it."


def job_brief(tasks: int) -> str:
    """The job as the office manager hands it on; the flat agent gets the same text."""
    lines = [f"Task {n}: {task_spec(n)}" for n in range(1, tasks + 1)]
    return f"Job: widgets issue 'Task files'. Do these {tasks} tasks:\n" + "\n".join(lines)


def worker_reply(number: int) -> str:
    return (
        f"Committed task {number} on its branch: added {task_path(number)} with the single "
        "line the spec asks for. No other file changed; the file has no tests, so none were "
        "run. Nothing is left open."
    )


def results(request: ModelRequest) -> list[str]:
    return [m.text for m in request.messages if m.role == "tool"]


def call(call_id: str, name: str, **args: object) -> ToolCall:
    return ToolCall(call_id, name, args)


@dataclass
class Script:
    """Every role's reply as a function of its transcript; keeps each request and reply."""

    tasks: int
    review: str
    log: list[tuple[ModelRequest, AssistantTurn]] = field(default_factory=list)

    def model(self) -> FunctionModel:
        return FunctionModel(self.reply)

    def reply(self, request: ModelRequest) -> AssistantTurn:
        role = request.agent.rsplit("/", 1)[-1]
        roles: Mapping[str, Callable[[ModelRequest], AssistantTurn]] = {
            "office-manager": self.office_manager,
            "project-lead": self.project_lead,
            "implementer": self.implementer,
        }
        turn = roles.get(role, self.reviewer)(request)
        self.log.append((request, turn))
        return turn

    def office_manager(self, request: ModelRequest) -> AssistantTurn:
        done = results(request)
        if not done:
            send = call("om-1", "send", member=PROJECT, message=job_brief(self.tasks))
            return AssistantTurn(tool_calls=(send,))
        return AssistantTurn(text=f"Job done. The project lead reported: {done[-1]}")

    def project_lead(self, request: ModelRequest) -> AssistantTurn:
        done, n = results(request), self.tasks
        if not done:
            return AssistantTurn(tool_calls=tuple(self._create(k) for k in range(1, n + 1)))
        if len(done) == n:
            brief = "The file goes under tasks/ at the repository root."
            dispatches = (call(f"go-{k}", "dispatch", task=k, brief=brief) for k in range(1, n + 1))
            return AssistantTurn(tool_calls=tuple(dispatches))
        return AssistantTurn(text=f"All {n} tasks merged; each added its tasks/ file.")

    def _create(self, number: int) -> ToolCall:
        title = f"Add task file {number}"
        spec = task_spec(number)
        return call(f"plan-{number}", "task_create", title=title, spec=spec, review=self.review)

    def implementer(self, request: ModelRequest) -> AssistantTurn:
        match = TASK.search(request.messages[0].text)
        assert match, request.messages[0].text
        number, done = int(match.group(1)), results(request)
        if not done:
            write = call("w", "write_file", path=task_path(number), content=f"task {number}\n")
            return AssistantTurn(tool_calls=(write,))
        if len(done) == 1:
            commit = f"git add -A && git commit -qm 'Task {number}'"
            return AssistantTurn(tool_calls=(call("c", "shell", command=commit),))
        if not done[-1].endswith("[exit code 0]"):
            return AssistantTurn(text=f"blocked: the commit failed: {done[-1]}")
        return AssistantTurn(text=worker_reply(number))

    def reviewer(self, request: ModelRequest) -> AssistantTurn:
        """Spec, quality and phase reviewers: approve at once."""
        return AssistantTurn(text="approve\nMeets the spec: the one file, committed.")


# --- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """One measured call: what it was, when it started, how long it took."""

    what: str
    started: float
    seconds: float


def git_label(args: Sequence[str]) -> str:
    """A git call's command, e.g. `worktree add` or `merge-tree` (leading -c pairs skipped)."""
    words = list(args)
    while words[:1] == ["-c"]:
        words = words[2:]
    if words[:1] == ["worktree"]:
        return " ".join(words[:2])
    return words[0] if words else "git"


@contextlib.contextmanager
def timing_git(calls: list[Timed]) -> Iterator[None]:
    """Time every git subprocess the engine runs (worktrees, workspace and team_tools)."""
    original = worktrees.git

    async def timed(repo: Path, *args: str, check: bool = True) -> tuple[int, str]:
        started = time.perf_counter()
        try:
            return await original(repo, *args, check=check)
        finally:
            calls.append(Timed(git_label(args), started, time.perf_counter() - started))

    worktrees.git = workspace.git = team_tools.git = timed
    try:
        yield
    finally:
        worktrees.git = workspace.git = team_tools.git = original


@dataclass
class TimedRunner:
    """A ToolRunner that times the calls it hands to `inner`."""

    inner: ToolRunner
    calls: list[Timed]

    async def run(self, agent: str, conversation_id: str, call: ToolCall) -> ToolResult:
        started = time.perf_counter()
        try:
            return await self.inner.run(agent, conversation_id, call)
        finally:
            self.calls.append(Timed(call.name, started, time.perf_counter() - started))


def git_env() -> dict[str, str]:
    return {**os.environ, **IDENTITY}


def run_git(repo: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=git_env()
    )
    return done.stdout


def make_repo(path: Path, files: int) -> str:
    """A bare repository of one commit of `files` small files (FILES_PER_DIR a directory).

    Written with git fast-import: no file is created on disk, which on a slow filesystem
    would cost as much as the checkouts being measured.
    """
    run_git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))
    stream = bytearray()
    for number in range(files):
        text = f'"""Module {number}."""\n\nVALUE_{number} = {number}\n'.encode()
        stream += b"blob\nmark :%d\ndata %d\n%s\n" % (number + 1, len(text), text)
    stream += b"commit refs/heads/main\ncommitter bench <bench@example.com> 1767225600 +0000\n"
    stream += b"data 5\ninit\n"
    for number in range(files):
        name = f"src/d{number // FILES_PER_DIR:04}/m{number % FILES_PER_DIR:02}.py"
        stream += b"M 100644 :%d %s\n" % (number + 1, name.encode())
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet"], input=bytes(stream), check=True
    )
    return run_git(path, "rev-parse", "main").strip()


# --- one job through the office ------------------------------------------------------------


@dataclass
class JobRun:
    """What one job cost: phases' wall time, git calls, worker tool calls, model traffic."""

    tasks: int
    start_s: float = 0.0
    run_s: float = 0.0
    finish_s: float = 0.0
    run_started: float = 0.0
    gits: list[Timed] = field(default_factory=list)
    tools: list[Timed] = field(default_factory=list)
    script: Script | None = None


async def run_job(home: Path, repo: Path, *, tasks: int, review: str, parallel: int) -> JobRun:
    """Run the scripted job once in a fresh state directory `home`; check every task merged."""
    org = load_organisation(shipped_org_dir())
    text = f"humans: {{decider: alice}}\nparallel: {parallel}\n"
    project = load_project(text, org=org, source="project.yaml", default_name=PROJECT)
    script = Script(tasks, review)
    model = script.model()
    env = {"PATH": os.environ["PATH"], **IDENTITY}
    measured = JobRun(tasks, script=script)
    office = await Office.open(home, org=org, projects=[project], models=lambda _: model, env=env)
    try:
        time_worker_tools(office, measured.tools)
        with timing_git(measured.gits):
            await drive(office, repo, measured)
        states = await office.engine.store.read(lambda tx: list_tasks(tx, 1))
    finally:
        await office.close()
    assert [t.state for t in states] == ["done"] * tasks, [(t.number, t.state) for t in states]
    return measured


def time_worker_tools(office: Office, calls: list[Timed]) -> None:
    toolbox = office.engine.scheduler.runner.tools
    assert isinstance(toolbox, Toolbox)
    for name in WORKER_TOOLS:
        toolbox.runners[name] = TimedRunner(toolbox.runners[name], calls)


async def drive(office: Office, repo: Path, measured: JobRun) -> None:
    """start_job, run and finish_job, each timed."""
    started = time.perf_counter()
    job = await office.start_job(
        project=PROJECT,
        key="widgets#1",
        title="Task files",
        brief="Issue #1: task files.",
        repo=PROJECT,
        source=str(repo),
        start=run_git(repo, "rev-parse", "HEAD").strip(),
        branch=lambda job_id: f"teaparty/job-{job_id}-task-files",
        slug="task-files",
    )
    measured.run_started = time.perf_counter()
    measured.start_s = measured.run_started - started
    result = await office.run(job, never)
    measured.run_s = time.perf_counter() - measured.run_started
    started = time.perf_counter()
    await office.finish_job(job, result)
    measured.finish_s = time.perf_counter() - started
    assert_merges(job, measured.tasks)


def assert_merges(job: JobHandle, tasks: int) -> None:
    span = f"{job.space.base}..{job.space.branch}"
    merges = run_git(job.space.mirror, "rev-list", "--count", "--merges", span)
    assert int(merges) == tasks, (merges, tasks)


async def never(gate: object) -> str:
    raise AssertionError(f"no gate expected: {gate}")


# --- 1. overhead ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Split:
    """Per-task seconds of a job in steady state, and its one-time costs."""

    total: float
    git: float
    worker: float
    by_command: dict[str, float]
    once: dict[str, float]

    @property
    def orchestration(self) -> float:
        return self.total - self.worker

    @property
    def engine(self) -> float:
        return self.total - self.git - self.worker


def split(run: JobRun) -> Split:
    """Steady per-task figures: the run phase without the slot(s) created during it."""
    during = [g for g in run.gits if g.started >= run.run_started]
    slots = [g for g in during if g.what == "worktree add"]
    before = [g for g in run.gits if g.started < run.run_started]
    mirror = sum(g.seconds for g in before if g.what in MIRROR_GIT)
    steady = [g for g in during if g.what != "worktree add"]
    by_command: dict[str, float] = {}
    for g in steady:
        by_command[g.what] = by_command.get(g.what, 0.0) + g.seconds / run.tasks
    slot_s = sum(g.seconds for g in slots)
    once = {
        "mirror clone + fetch (git)": mirror,
        "start_job: job branch + worktree, store": run.start_s - mirror,
        f"slot creation ({len(slots)} slot(s), git)": slot_s,
        "finish_job: job worktree removal": run.finish_s,
    }
    return Split(
        total=(run.run_s - slot_s) / run.tasks,
        git=sum(g.seconds for g in steady) / run.tasks,
        worker=sum(t.seconds for t in run.tools) / run.tasks,
        by_command=by_command,
        once=once,
    )


@dataclass(frozen=True)
class RawRun:
    """Raw git per task: the whole, and the write + add + commit part; the one-time clone."""

    total: float
    work: float
    once: float

    @property
    def orchestration(self) -> float:
        return self.total - self.work


def raw_git(repo: Path, copy: Path, tasks: int) -> RawRun:
    """Baseline: per task a fresh worktree and branch, a commit, a merge, the removal."""
    started = time.perf_counter()
    subprocess.run(["git", "clone", "-q", str(repo), str(copy)], check=True, env=git_env())
    run_git(copy, "checkout", "-q", "-b", "job")
    once = time.perf_counter() - started
    total = work = 0.0
    for number in range(1, tasks + 1):
        path, branch = copy.parent / f"raw-{number}", f"raw-{number}"
        t0 = time.perf_counter()
        run_git(copy, "worktree", "add", "-q", "-b", branch, str(path), "job")
        t1 = time.perf_counter()
        (path / task_path(number)).parent.mkdir(exist_ok=True)
        (path / task_path(number)).write_text(f"task {number}\n")
        run_git(path, "add", "-A")
        run_git(path, "commit", "-qm", f"Task {number}")
        t2 = time.perf_counter()
        run_git(copy, "merge", "-q", "--no-ff", "-m", f"Merge task #{number}", branch)
        run_git(copy, "worktree", "remove", str(path))
        total, work = total + time.perf_counter() - t0, work + t2 - t1
    return RawRun(total / tasks, work / tasks, once)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:>10.1f}"


def print_overhead(ours: Split, raw: RawRun, parallel: JobRun, *, files: int, tasks: int) -> float:
    """The table of part 1; returns the steady ratio of orchestration to raw git's."""
    print(f"1. per-task overhead, ms ({files:,} files, T={tasks}, review none, zero latency)")
    print(f"{'':<46}{'ours':>10}{'raw git':>10}{'ratio':>8}")
    ratio = ours.orchestration / raw.orchestration
    rows = [
        ("total per task (steady: one-time costs apart)", ours.total, raw.total),
        ("  worker: write_file + shell commit", ours.worker, raw.work),
        ("  orchestration (total - worker)", ours.orchestration, raw.orchestration),
        ("    git subprocesses of the engine", ours.git, raw.orchestration),
        ("    engine (the rest: store, turns, tools)", ours.engine, 0.0),
    ]
    for label, mine, base in rows:
        shown = f"{mine / base:>8.2f}" if base else ""
        print(f"{label:<46}{ms(mine)}{ms(base) if base else '':>10}{shown}")
    commands = sorted(ours.by_command.items(), key=lambda kv: -kv[1])
    print("    git by command: " + ", ".join(f"{c} {s * 1e3:.1f}" for c, s in commands))
    par = split(parallel)
    print(
        f"{'parallel 3: wall per task (git process time)':<46}{ms(par.total)}"
        f"{ms(raw.total)}{par.total / raw.total:>8.2f}   ({par.git * 1e3:.1f} ms git)"
    )
    print_once(ours, raw, tasks)
    return ratio


def print_once(ours: Split, raw: RawRun, tasks: int) -> None:
    print(f"{'one-time costs, ms':<46}{'once':>10}{f'/T={tasks}':>10}")
    for label, seconds in ours.once.items():
        print(f"  {label:<44}{ms(seconds)}{ms(seconds / tasks)}")
    print(f"  {'raw git: clone + job-branch checkout':<44}{ms(raw.once)}{ms(raw.once / tasks)}")
    once = sum(ours.once.values()) / tasks
    mine, base = ours.orchestration + once, raw.orchestration + raw.once / tasks
    label = "orchestration per task, amortised"
    print(f"{label:<46}{ms(mine)}{ms(base)}{mine / base:>8.2f}")
    print(
        "  ours: the job through Office (office manager, project lead, mini-teams, merges);"
        "\n  git: every git subprocess of orchestrator.worktrees/workspace/team_tools, timed"
        "\n  by wrapping their `git`; worker: its write_file and shell calls, timed at the"
        "\n  toolbox. raw git: worktree add -b, write, add, commit, merge --no-ff in a job-branch"
        "\n  checkout, worktree remove; orchestration = all but the write+add+commit."
    )


async def overhead(tmp: Path, repo: Path, *, files: int, tasks: int) -> float:
    sequential = await run_job(tmp / "seq", repo, tasks=tasks, review="none", parallel=1)
    parallel = await run_job(tmp / "par", repo, tasks=tasks, review="none", parallel=3)
    raw = raw_git(repo, tmp / "raw" / "job", tasks)
    return print_overhead(split(sequential), raw, parallel, files=files, tasks=tasks)


# --- 2. context ----------------------------------------------------------------------------


ROLES = {"lead": "project-lead", "worker": "implementer", "reviewer": "-reviewer"}


def tokens(request: ModelRequest) -> int:
    return estimate_tokens(request.messages) + len(request.system) // 4


def role_of(agent: str) -> str:
    short = agent.rsplit("/", 1)[-1]
    if short == "phase-reviewer":
        return "phase"
    return next((role for role, end in ROLES.items() if short.endswith(end)), short)


def as_message(turn: AssistantTurn, role: str = "assistant") -> Message:
    content = assistant_content(turn) if role == "assistant" else {"text": turn.text}
    return Message("flat", 0, "flat", "assistant" if role == "assistant" else "user", content)


def flat_transcript(log: Sequence[tuple[ModelRequest, AssistantTurn]]) -> list[Message]:
    """One agent's transcript of the whole job, from the messages the team's agents saw.

    The job brief; per task the worker's conversation (brief, tool calls, results, reply);
    every verdict (task reviewers, phase reviewer) as a message read.
    """
    brief = next(r.messages[0] for r, _ in log if role_of(r.agent) == "lead")
    last: dict[str, tuple[ModelRequest, AssistantTurn]] = {}
    for request, turn in log:
        last[request.messages[0].conversation_id] = (request, turn)
    flat = [brief]
    for request, turn in last.values():
        role = role_of(request.agent)
        if role == "worker":
            flat += [*request.messages, as_message(turn)]
        elif role in ("reviewer", "phase"):
            flat.append(as_message(turn, "user"))
    return flat


@dataclass(frozen=True)
class Peaks:
    """Peak estimated tokens of each role's requests in one job, and of the flat agent."""

    roles: dict[str, int]
    flat: int
    lead_received: int


def peaks(script: Script) -> Peaks:
    roles: dict[str, int] = {}
    for request, _ in script.log:
        role = role_of(request.agent)
        roles[role] = max(roles.get(role, 0), tokens(request))
    worker_system = next(r.system for r, _ in script.log if role_of(r.agent) == "worker")
    flat = estimate_tokens(flat_transcript(script.log)) + len(worker_system) // 4
    lead = max((r for r, _ in script.log if role_of(r.agent) == "lead"), key=tokens)
    received = estimate_tokens([m for m in lead.messages if m.role == "tool"])
    return Peaks(roles, flat, received)


async def context(tmp: Path, repo: Path, sizes: Sequence[int]) -> list[str]:
    """The table of part 2; returns the verdict lines."""
    print(f"\n2. peak context, est. tokens (review full, {len(sizes)} jobs)")
    columns = ("lead", "worker", "reviewer", "phase")
    print(f"{'':<14}" + "".join(f"{c:>10}" for c in columns) + f"{'flat':>10}{'flat/worker':>13}")
    found: dict[int, Peaks] = {}
    for tasks in sizes:
        run = await run_job(tmp / f"ctx-{tasks}", repo, tasks=tasks, review="full", parallel=1)
        assert run.script is not None
        found[tasks] = got = peaks(run.script)
        cells = "".join(f"{got.roles[c]:>10,}" for c in columns)
        ratio = got.flat / got.roles["worker"]
        print(f"{f'T={tasks} tasks':<14}{cells}{got.flat:>10,}{ratio:>13.1f}")
    print(
        "  tokens = estimate_tokens(request.messages) + len(system)//4, max over the role's"
        "\n  requests (reviewer: spec and quality). flat: built from this run's messages, not"
        "\n  run through the engine: the job brief, every worker conversation (brief, calls,"
        "\n  results, reply) and every verdict, in one transcript, with the worker's system."
    )
    return context_verdicts(found)


def growth(found: Mapping[int, Peaks], pick: Callable[[Peaks], int]) -> float:
    """Tokens per task added from the smallest job to the largest."""
    small, large = min(found), max(found)
    return (pick(found[large]) - pick(found[small])) / (large - small)


def context_verdicts(found: Mapping[int, Peaks]) -> list[str]:
    lines = []
    for role in ("worker", "reviewer"):
        values = [p.roles[role] for p in found.values()]
        spread = max(values) / min(values)
        ok = "met" if spread <= 1.05 else "not met"
        lines.append(f"{role} context flat across sizes (max/min <= 1.05): {ok}, {spread:.3f}")
    lead = growth(found, lambda p: p.roles["lead"])
    received = growth(found, lambda p: p.lead_received)
    bound = RESULT_MAX // 4
    ok = "met" if received <= bound else "not met"
    lines.append(
        f"lead grows by a short summary per task (engine replies <= {bound} tokens, "
        f"RESULT_MAX chars): {ok}, +{lead:.0f} tokens/task, of which {received:.0f} "
        "its tool results (task_create, mini-team reply), the rest its own calls and brief"
    )
    sizes = sorted(found)
    steps = [
        (found[b].flat - found[a].flat) / (b - a) for a, b in zip(sizes, sizes[1:], strict=False)
    ]
    linear = max(steps) / min(steps) <= 1.1 if len(steps) > 1 else True
    per_task = ", ".join(f"{s:.0f}" for s in steps)
    lines.append(f"flat agent grows linearly: {'met' if linear else 'not met'}, +{per_task}/task")
    return lines


# --- main ----------------------------------------------------------------------------------


async def main(*, files: int, tasks: int, sizes: Sequence[int]) -> None:
    with tempfile.TemporaryDirectory(prefix="teaparty-bench-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        make_repo(tmp / "repo", files)
        print(f"generated a repository of {files:,} files in {time.perf_counter() - started:.1f} s")
        ratio = await overhead(tmp, tmp / "repo", files=files, tasks=tasks)
        shutil.rmtree(tmp / "seq")  # disk: a mirror and slots of the big repository each
        shutil.rmtree(tmp / "par")
        make_repo(tmp / "small", 50)
        verdicts = await context(tmp, tmp / "small", sizes)
    print("\nverdicts:")
    ok = "met" if ratio <= 1.3 else "not met"
    print(f"  orchestration per task <= 1.3x raw git: {ok}, {ratio:.2f}x")
    for line in verdicts:
        print(f"  {line}")


def parse_sizes(text: str) -> list[int]:
    return [int(part) for part in text.split(",") if part.strip()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 files, T=5, sizes 5,10")
    parser.add_argument("--files", type=int, default=10_000, help="files in the repository")
    parser.add_argument("--tasks", type=int, default=20, help="tasks of the overhead job")
    parser.add_argument("--sizes", type=parse_sizes, default=[5, 20, 50], help="e.g. 5,20,50")
    args = parser.parse_args()
    if args.quick:
        args.files, args.tasks, args.sizes = 2_000, 5, [5, 10]
    asyncio.run(main(files=args.files, tasks=args.tasks, sizes=args.sizes))
