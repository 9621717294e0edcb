"""Benchmark of jobs run by mini-teams on a real git repository, measured in one run.

    python bench/teams.py [--quick] [--files N] [--tasks T] [--sizes 5,20,50]

1. Overhead: a scripted organisation (zero-latency model) runs a job of T tasks, review
   `none`, on a generated N-file repository: the project lead creates and dispatches them,
   each task's worker writes a file and checks `git status` with the (sandboxed) shell
   tool, the engine commits and merges.
   Per task: the engine's git subprocesses, the worker's tools and the rest, beside raw git
   on a copy (worktree add -b, write, add, commit, merge --no-ff, worktree remove).
2. Context: review `full`, jobs of 5, 20 and 50 tasks: the peak estimated context of lead,
   worker and reviewers, beside one flat agent doing every task in one conversation.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import textwrap
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from teams_job import (
    JobRun,
    Log,
    make_repo,
    run_git,
    run_job,
    seconds,
    task_path,
)

from orchestrator.agents.context import estimate_tokens
from orchestrator.core.messages import AssistantTurn, Message, assistant_content
from orchestrator.core.model import ModelRequest
from orchestrator.teams.board import RESULT_MAX


@dataclass(frozen=True)
class Split:
    """Seconds per task in steady state (slot creation apart), and the one-time costs."""

    total: float
    git: float
    worker: float
    by_command: dict[str, float]
    once: dict[str, float]


def split(run: JobRun) -> Split:
    """Per task: the run phase without the slot creation in it (one mini-team at a time)."""
    setup, during = run.gits_in("start"), run.gits_in("run")
    mirror = sum(g.seconds for g in setup if g.what.split("@")[0] in ("init", "fetch"))
    job_tree = sum(g.seconds for g in setup if g.what.startswith("worktree add"))
    slots = [g for g in during if g.what.startswith("worktree add")]
    steady = [g for g in during if g not in slots]
    by_command: dict[str, float] = {}
    for g in steady:
        by_command[g.what] = by_command.get(g.what, 0.0) + g.seconds / run.tasks
    once = {
        "mirror and job repository: init, fetch": mirror,
        "job worktree: worktree add (a checkout)": job_tree,
        "start_job, the rest (store, branch)": run.seconds("start") - mirror - job_tree,
        f"slot creation: worktree add x{len(slots)} (a checkout)": seconds(slots),
        "finish_job: job worktree removal, release": run.seconds("finish"),
    }
    total = (run.seconds("run") - seconds(slots)) / run.tasks
    return Split(total, sum(by_command.values()), seconds(run.tools) / run.tasks, by_command, once)


@dataclass(frozen=True)
class RawRun:
    """Raw git seconds of each task (all of it, and its write + add + commit); the clone."""

    totals: list[float]
    works: list[float]
    once: float


def commit_file(path: Path, number: int) -> float:
    """The worker's part by hand: write the task's file, git add, git commit; its seconds."""
    started = time.perf_counter()
    file = path / task_path(number)
    file.parent.mkdir(exist_ok=True)
    file.write_text(f"task {number}\n")
    run_git(path, "add", "-A")
    run_git(path, "commit", "-qm", f"Task {number}")
    return time.perf_counter() - started


def raw_git(repo: Path, copy: Path, tasks: int) -> RawRun:
    """Baseline: per task a new worktree and branch, the commit, a merge, the removal."""
    copy.parent.mkdir()
    started = time.perf_counter()
    run_git(copy.parent, "clone", "-q", "-b", "main", str(repo), str(copy))
    run_git(copy, "checkout", "-q", "-b", "job")
    measured = RawRun([], [], time.perf_counter() - started)
    for n in range(1, tasks + 1):
        path, started = copy.parent / f"raw-{n}", time.perf_counter()
        run_git(copy, "worktree", "add", "-q", "-b", f"raw-{n}", str(path), "job")
        measured.works.append(commit_file(path, n))
        run_git(copy, "merge", "-q", "--no-ff", "-m", f"Merge task #{n}", f"raw-{n}")
        run_git(copy, "worktree", "remove", str(path))
        measured.totals.append(time.perf_counter() - started)
    return measured


def raw_recycled(copy: Path, tasks: int) -> RawRun:
    """Baseline 2, the engine's strategy by hand: one worktree reused (checkout -f -B)."""
    path, started = copy.parent / "recycled", time.perf_counter()
    run_git(copy, "worktree", "add", "-q", "--detach", str(path), "job")
    measured = RawRun([], [], time.perf_counter() - started)
    for n in range(1001, 1001 + tasks):  # file names apart from the first baseline's
        started = time.perf_counter()
        run_git(path, "checkout", "-q", "-f", "-B", f"raw-{n}", "job")
        measured.works.append(commit_file(path, n))
        run_git(copy, "merge", "-q", "--no-ff", "-m", f"Merge task #{n}", f"raw-{n}")
        measured.totals.append(time.perf_counter() - started)
    return measured


def orchestration(raw: RawRun) -> float:
    """Mean seconds a task of raw git spent on all but write + add + commit."""
    return statistics.mean(raw.totals) - statistics.mean(raw.works)


def committing(ours: Split) -> float:
    """Seconds a task of the engine's `add` + `commit` of the worker's change: the part the
    raw baselines count as the worker's (their write + add + commit), since agents here
    cannot write git data and the engine commits for them."""
    return ours.by_command.get("add@slot", 0.0) + ours.by_command.get("commit@slot", 0.0)


def row(label: str, ours: float, raw: float | None = None, *, ratio: bool = True) -> None:
    cells = "".join(f"{s * 1e3:>10.1f}" for s in (ours, raw) if s is not None)
    shown = f"{ours / raw:>8.2f}" if raw and ratio else ""
    print(f"{label:<52}{cells}{shown}")


def print_overhead(ours: Split, raw: RawRun, recycled: RawRun, *, tasks: int) -> float:
    """Part 1's table; returns orchestration per task over raw git's, in steady state."""
    raw_total, raw_work = statistics.mean(raw.totals), statistics.mean(raw.works)
    mine, base = ours.total - ours.worker, orchestration(raw)
    print(f"{'per task, ms':<52}{'ours':>10}{'raw git':>10}{'ratio':>8}")
    row("total, steady state (one-time costs apart)", ours.total, raw_total)
    row("  worker: write_file + shell (git status; raw: add, commit)", ours.worker, raw_work)
    row("  orchestration = total - worker", mine, base)
    row("    git subprocesses of the engine", ours.git, base)
    row("    the engine's own work (store, turns, tools)", ours.total - ours.git - ours.worker)
    ranked = sorted(ours.by_command.items(), key=lambda kv: -kv[1])
    commands = ", ".join(f"{c} {s * 1e3:.1f}" for c, s in ranked)
    lead = "    engine git, ms a task: "
    wrap = textwrap.TextWrapper(90, lead, " " * 6, break_on_hyphens=False)
    print(wrap.fill(commands))
    spread = ", ".join(f"{s * 1e3:.0f}" for s in raw.totals)
    print(f"    raw git, ms each task: {spread} (each a full checkout)")
    row("orchestration vs raw git recycling one worktree", mine, orchestration(recycled))
    row(
        "  without the worker's commit (engine's add + commit)",
        mine - committing(ours),
        orchestration(recycled),
    )
    print_once(ours, raw, tasks=tasks)
    print(
        "  engine git: every git subprocess of orchestrator.workspace.git, .workspace and"
        "\n  .team_tools (their `git` wrapped with a timer); worker: its tool calls, timed at"
        "\n  the toolbox. raw git: worktree add -b, write, add, commit, merge --no-ff in a"
        f"\n  job-branch checkout, worktree remove, for {len(raw.totals)} tasks; recycling: the"
        "\n  same in one reused worktree (checkout -f -B, no remove). orchestration = all but"
        f"\n  write+add+commit. One-time costs are amortised over T={tasks} for both."
    )
    return mine / base


def print_once(ours: Split, raw: RawRun, *, tasks: int) -> None:
    """The one-time costs, and orchestration per task with them amortised over the job."""
    print(f"{'one-time, ms':<52}{'once':>10}{f'/ {tasks}':>10}")
    for label, spent in ours.once.items():
        row(f"  {label}", spent, spent / tasks, ratio=False)
    row("  raw git: clone + job-branch checkout", raw.once, raw.once / tasks, ratio=False)
    mine = ours.total - ours.worker + sum(ours.once.values()) / tasks
    row("orchestration per task, amortised", mine, orchestration(raw) + raw.once / tasks)


async def overhead(tmp: Path, repo: Path, options: argparse.Namespace) -> tuple[float, float]:
    """Run part 1 and print its table; the orchestration ratios to both raw baselines."""
    tasks = options.tasks
    print(
        f"1. per-task overhead: {options.files:,} files, a job of T={tasks} tasks, review none,"
        "\n   zero-latency model, one mini-team at a time (parallel: 1, so the split is exact)"
    )
    run = await run_job(tmp / "home", repo, tasks=tasks, review="none", parallel=1)
    raw = raw_git(repo, tmp / "raw" / "job", options.raw_tasks)
    recycled = raw_recycled(tmp / "raw" / "job", tasks)
    ours = split(run)
    ratio = print_overhead(ours, raw, recycled, tasks=tasks)
    return ratio, (ours.total - ours.worker - committing(ours)) / orchestration(recycled)


# --- 2. context ----------------------------------------------------------------------------


def tokens(request: ModelRequest) -> int:
    return estimate_tokens(request.messages) + len(request.system) // 4


def role_of(agent: str) -> str:
    """lead, worker, reviewer (spec or quality), phase, or the agent's short name."""
    short = agent.rsplit("/", 1)[-1]
    names = {"project-lead": "lead", "implementer": "worker", "phase-reviewer": "phase"}
    return names.get(short, "reviewer" if short.endswith("-reviewer") else short)


def flat_transcript(log: Log) -> list[Message]:
    """One agent's transcript of the whole job, from the messages the team's agents saw.

    The job brief; per task the worker's conversation (brief, tool calls, results, reply);
    every verdict (task reviewers, phase reviewer) as a message it reads.
    """
    last: dict[str, tuple[ModelRequest, AssistantTurn]] = {}
    for request, answer in log:
        last[request.messages[0].conversation_id] = (request, answer)
    flat = [next(r.messages[0] for r, _ in log if role_of(r.agent) == "lead")]
    for request, answer in last.values():
        if role_of(request.agent) == "worker":
            reply = Message("flat", 0, "flat", "assistant", assistant_content(answer))
            flat += [*request.messages, reply]
        elif role_of(request.agent) in ("reviewer", "phase"):
            flat.append(Message("flat", 0, "flat", "user", {"text": answer.text}))
    return flat


@dataclass(frozen=True)
class Peaks:
    """Peak estimated tokens of each role in one job, the flat agent's, the lead's replies."""

    roles: dict[str, int]
    flat: int
    lead_received: int


def peaks(log: Log) -> Peaks:
    roles: dict[str, int] = {}
    for request, _ in log:
        role = role_of(request.agent)
        roles[role] = max(roles.get(role, 0), tokens(request))
    system = next(r.system for r, _ in log if role_of(r.agent) == "worker")
    flat = estimate_tokens(flat_transcript(log)) + len(system) // 4
    lead = max((r for r, _ in log if role_of(r.agent) == "lead"), key=tokens)
    return Peaks(roles, flat, estimate_tokens([m for m in lead.messages if m.role == "tool"]))


async def context(tmp: Path, repo: Path, sizes: Sequence[int]) -> list[str]:
    """Run part 2 and print its table; return the verdict lines."""
    print("\n2. peak context, est. tokens (review full, parallel: 3, a 50-file repository)")
    columns = ("lead", "worker", "reviewer", "phase")
    print(f"{'':<14}" + "".join(f"{c:>10}" for c in columns) + f"{'flat':>10}{'flat/worker':>13}")
    found: dict[int, Peaks] = {}
    for tasks in sizes:
        run = await run_job(tmp / f"ctx-{tasks}", repo, tasks=tasks, review="full", parallel=3)
        found[tasks] = got = peaks(run.script.log)
        cells = "".join(f"{got.roles[c]:>10,}" for c in columns)
        ratio = got.flat / got.roles["worker"]
        print(f"{f'T={tasks} tasks':<14}{cells}{got.flat:>10,}{ratio:>13.1f}")
    print(
        "  tokens = estimate_tokens(request.messages) + len(system)//4, the max over the role's"
        "\n  requests (reviewer: spec and quality). flat: not run through the engine but built"
        "\n  from this run's messages: the job brief, every worker conversation (brief, calls,"
        "\n  results, reply) and every verdict in one transcript, with the worker's system."
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
        met = "met" if spread <= 1.05 else "NOT met"
        lines.append(f"{role} context flat in T (max/min <= 1.05): {met}, {spread:.3f}")
    lead = growth(found, lambda p: p.roles["lead"])
    received = growth(found, lambda p: p.lead_received)
    met = "met" if received <= RESULT_MAX // 4 else "NOT met"
    lines.append(
        f"lead grows by a short summary a task (tool results <= RESULT_MAX/4 = "
        f"{RESULT_MAX // 4} tokens a task): {met}, +{lead:.0f} tokens/task, {received:.0f} of"
        " them its tool results (task_create, mini-team reply), the rest its brief line and calls"
    )
    sizes = sorted(found)
    pairs = zip(sizes, sizes[1:], strict=False)
    steps = [(found[b].flat - found[a].flat) / (b - a) for a, b in pairs]
    met = "met" if max(steps) <= 1.1 * min(steps) else "NOT met"
    shown = " then ".join(f"+{s:.0f}" for s in steps)
    lines.append(f"flat agent grows linearly (steps within 10%): {met}, {shown} tokens/task")
    return lines


# --- main ----------------------------------------------------------------------------------


async def main(options: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="teaparty-bench-") as name:
        tmp = Path(name)
        started = time.perf_counter()
        repo = make_repo(tmp / "repo.git", options.files)
        took = time.perf_counter() - started
        print(f"generated a repository of {options.files:,} files in {took:.1f} s")
        ratio, recycled = await overhead(tmp, repo, options)
        verdicts = await context(tmp, make_repo(tmp / "small.git", 50), options.sizes)
    print("\nverdicts:")
    met = "met" if ratio <= 1.3 else "NOT met"
    print(f"  orchestration per task <= 1.3x raw git's (steady state): {met}, {ratio:.2f}x")
    met = "met" if recycled <= 1.3 else "NOT met"
    print(
        "  the same against raw git recycling one worktree (the commit apart on both sides):"
        f" {met}, {recycled:.2f}x"
    )
    for line in verdicts:
        print(f"  {line}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="2,000 files, T=5, sizes 5,10")
    parser.add_argument("--files", type=int, default=10_000, help="files in the repository")
    parser.add_argument("--tasks", type=int, default=20, help="tasks of the overhead job")
    parser.add_argument("--raw-tasks", type=int, default=5, help="tasks of the raw git baseline")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[5, 20, 50],
        help="e.g. 5,20,50",
    )
    options = parser.parse_args()
    if options.quick:
        options.files, options.tasks, options.raw_tasks, options.sizes = 2_000, 5, 3, [5, 10]
    asyncio.run(main(options))
