"""What the sandbox costs: a shell call, confined and not, and whole jobs with and without it.

    python bench/sandbox.py [--quick] [--calls N]

1. Per call: the agent's shell tool running `true`, and `git status --short` in a task's
   worktree of a real job repository, N times each (default 60; --quick 20) under
   TEAPARTY_SANDBOX=off, bwrap and landlock (each where this host has it), measured in one
   run. Median and p90, and the median added over `off`. Goal: bwrap adds <= 30 ms at
   the median (the full run exits 1 when it is missed; --quick, which CI runs on a shared
   machine, reports it; Landlock's launcher is a Python process, shown, not held to it).
2. Whole jobs: `teaparty demo` (its scripted agents run no shell, so this is the cost of
   probing and wiring the sandbox), and bench/teams.py's scripted job of T tasks whose
   workers each run one shell call (T=5; --quick 3), each with the sandbox off and on.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.core.errors import SandboxError
from orchestrator.sandbox.confine import Sandbox
from orchestrator.sandbox.probe import probe
from orchestrator.workspace.file_tools import WorktreeTools
from orchestrator.workspace.git import add_worktree, git

sys.path.insert(0, str(Path(__file__).resolve().parent))
import teams

ROOT = Path(__file__).resolve().parent.parent
GOAL_MS = 30.0
MODES = ("off", "bwrap", "landlock")


async def sandboxes(base: Path) -> dict[str, Sandbox]:
    """Each mode this host gives; a traversable home, as Landlock as root needs."""
    found: dict[str, Sandbox] = {}
    for mode in MODES:
        home = base / f"home-{mode}"
        home.mkdir(mode=0o711)
        home.chmod(0o711)
        try:
            found[mode] = await probe({"TEAPARTY_SANDBOX": mode}, home=home)
        except SandboxError as exc:
            print(f"  {mode}: not on this host ({exc})")
    return found


def make_repo(base: Path, files: int) -> Path:
    base.mkdir(mode=0o711)
    return teams.make_repo(base / "repo.git", files)


async def worktree(base: Path, files: int) -> tuple[Path, Path]:
    """A job-like repository with `files` files and a linked worktree of it."""
    repo = make_repo(base, files)
    checkout = await add_worktree(repo, base / "slots" / "slot-1", "refs/heads/main")
    os.chmod(base, 0o711)
    os.chmod(base / "slots", 0o755)
    return repo, checkout.path


def own(path: Path, sandbox: Sandbox) -> None:
    if sandbox.run_as is not None and sandbox.confined:
        for folder, dirs, names in os.walk(path):
            for name in [*dirs, *names, ""]:
                os.lchown(os.path.join(folder, name) if name else folder, *sandbox.run_as)


async def per_call(found: dict[str, Sandbox], base: Path, calls: int) -> bool:
    repo, work = await worktree(base, 200)
    print(f"1. one shell call, ms (N={calls}; a 200-file worktree of a linked repository)")
    print(f"{'':34}{'median':>9}{'p90':>9}{'added':>9}")
    medians: dict[tuple[str, str], float] = {}
    for mode, sandbox in found.items():
        own(work, sandbox)
        tools = WorktreeTools(
            work,
            parent_env={"PATH": os.environ["PATH"]},
            sandbox=sandbox,
            readable=(repo,),
            checkout=None,
        )
        for command in ("true", "git status --short"):
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                await tools.shell.command(command)
                times.append((time.perf_counter() - started) * 1000)
            times.sort()
            median = statistics.median(times)
            medians[(mode, command)] = median
            added = median - medians.get(("off", command), median)
            label = f"  {mode:9} {command}"
            print(f"{label:34}{median:9.1f}{times[int(len(times) * 0.9) - 1]:9.1f}{added:+9.1f}")
        if sandbox.confined:  # an agent's call, which gets an egress proxy of its own
            times = []
            for _ in range(calls):
                started = time.perf_counter()
                await sandbox.run(
                    "true",
                    place=tools.shell.place,
                    env=tools.shell.env,
                    timeout_s=30,
                    cap=10_000,
                    refused=collections.Counter(),
                )
                times.append((time.perf_counter() - started) * 1000)
            times.sort()
            median = statistics.median(times)
            added = median - medians[(mode, "true")]
            medians[(mode, "agent")] = median
            label = f"  {mode:9} true, own egress proxy"
            print(f"{label:34}{median:9.1f}{times[int(len(times) * 0.9) - 1]:9.1f}{added:+9.1f}")
        await sandbox.close()
    if "bwrap" not in found:
        print("verdict: bwrap is not available here; the goal is not measured")
        return True
    # an agent's call is the one with its own egress proxy (the bridge's start included)
    added = medians[("bwrap", "agent")] - medians[("off", "true")]
    bare = medians[("bwrap", "true")] - medians[("off", "true")]
    met = added <= GOAL_MS
    print(
        f"verdict: bwrap adds {added:.1f} ms to an agent's call at the median ({bare:.1f} ms "
        f"without its egress proxy; goal <= {GOAL_MS:.0f}): {'met' if met else 'NOT met'}"
    )
    return met


def demo_seconds(mode: str, base: Path) -> float:
    env = {**os.environ, "TEAPARTY_SANDBOX": mode}
    env.pop("ANTHROPIC_API_KEY", None)
    home = Path(tempfile.mkdtemp(prefix=f"demo-{mode}-", dir=base))
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "bot.cli", "demo", "--home", str(home / "h")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"teaparty demo failed with TEAPARTY_SANDBOX={mode}:\n{done.stderr}")
    return seconds


async def team_seconds(mode: str, base: Path, tasks: int) -> float:
    os.environ["TEAPARTY_SANDBOX"] = mode  # teams.run_job reads it, as serve would
    work = Path(tempfile.mkdtemp(prefix=f"team-{mode}-", dir=base))
    repo = teams.make_repo(work / "origin.git", 200)
    started = time.perf_counter()
    await teams.run_job(work / "home", repo, tasks=tasks, review="none", parallel=3)
    return time.perf_counter() - started


async def jobs(found: dict[str, Sandbox], base: Path, tasks: int, repeats: int) -> None:
    confined = "bwrap" if "bwrap" in found else "landlock" if "landlock" in found else None
    if confined is None:
        print("2. whole jobs: no sandbox on this host to compare with")
        return
    print(f"\n2. whole jobs, s (median of {repeats}), sandbox off and {confined}")
    rows = {
        "teaparty demo (no shell calls)": lambda m: asyncio.to_thread(demo_seconds, m, base),
        f"scripted job, {tasks} tasks, a shell call each": lambda m: team_seconds(m, base, tasks),
    }
    for label, measure in rows.items():
        off = statistics.median([await measure("off") for _ in range(repeats)])
        on = statistics.median([await measure(confined) for _ in range(repeats)])
        print(f"  {label:44} off {off:6.2f}  {confined} {on:6.2f}  ratio {on / off:.2f}")


async def main(quick: bool, calls: int | None) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-sandbox-", dir="/tmp") as folder:
        base = Path(folder)
        os.chmod(base, 0o711)
        found = await sandboxes(base)
        met = await per_call(found, base / "calls", calls or (20 if quick else 60))
        await jobs(found, base, 3 if quick else 5, 1 if quick else 3)
        _, version = await git(None, "--version")
        print(f"\n{version.strip()}; python {sys.version.split()[0]}; {os.cpu_count()} cores")
    return 0 if met or quick else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer calls, one repeat")
    parser.add_argument("--calls", type=int, help="shell calls per mode and command")
    arguments = parser.parse_args()
    raise SystemExit(asyncio.run(main(arguments.quick, arguments.calls)))
