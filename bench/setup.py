"""What a repository's setup costs: the first job's preparation, the next job's, and a shell
call with the prepared environment shown against the same call without it.

    python bench/setup.py [--quick] [--calls N]

The test repository: a wheelhouse (pytest and its dependencies packed again from this
environment, and `tinylib`), a setup that makes a virtualenv and installs from it (no
index is reached), and a test that imports both. Under each sandbox this host gives
(bwrap, landlock):
1. setup: the first job's (the commands run) and the second job's (found in the cache), s;
2. per call: the agent's shell tool running `true`, N times (default 60; --quick 20), with
   and without the prepared environment; median and p90, and the median added. Goal: the
   prepared environment adds <= 10 ms at the median under bubblewrap (the full run exits 1
   when it is missed; --quick, which CI runs on a shared machine, reports it);
3. the project's test command (`python -m pytest -q`) once in a task's worktree, s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from wheelhouse import PYTEST, wheelhouse  # noqa: E402

from orchestrator.config.schema import SetupSettings  # noqa: E402
from orchestrator.core.errors import SandboxError  # noqa: E402
from orchestrator.sandbox.confine import Prepared, Sandbox  # noqa: E402
from orchestrator.sandbox.probe import probe  # noqa: E402
from orchestrator.setup.cache import SetupCache  # noqa: E402
from orchestrator.setup.prepare import Preparer  # noqa: E402
from orchestrator.workspace.file_tools import WorktreeTools  # noqa: E402

GOAL_MS = 10.0
SETUP = SetupSettings(
    commands=(
        "python3 -m venv .venv",
        ".venv/bin/pip install -q --no-index --find-links wheels pytest tinylib",
    ),
    test="python -m pytest -q",
)
TEST = "import tinylib\n\n\ndef test_double():\n    assert tinylib.double(2) == 4\n"


def repository(base: Path) -> Path:
    repo = base / "repo"
    repo.mkdir()
    (repo / "test_it.py").write_text(TEST)
    wheelhouse(repo / "wheels", *PYTEST)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(base), "GIT_AUTHOR_NAME": "b"}
    env |= {"GIT_AUTHOR_EMAIL": "b@x", "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@x"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "bench"]):
        subprocess.run(["git", "-C", str(repo), *args], env=env, check=True)
    return repo


def own(path: Path, who: tuple[int, int] | None) -> None:
    if who is not None:
        for folder, dirs, names in os.walk(path):
            for name in [*dirs, *names, ""]:
                os.lchown(os.path.join(folder, name) if name else folder, *who)


async def times_of(tools: WorktreeTools, command: str, calls: int) -> list[float]:
    found = []
    for _ in range(calls):
        started = time.perf_counter()
        await tools.shell.command(command)
        found.append((time.perf_counter() - started) * 1000)
    return sorted(found)


async def one_mode(mode: str, base: Path, repo: Path, calls: int) -> float | None:
    home = base / f"home-{mode}"
    home.mkdir(mode=0o711)
    home.chmod(0o711)
    try:
        sandbox = await probe({"TEAPARTY_SANDBOX": mode}, home=home)
    except SandboxError as exc:
        print(f"{mode}: not on this host ({exc})")
        return None
    print(f"{mode}:")
    preparer = Preparer(
        sandbox,
        SetupCache(home / "setup", bound_mb=4096),
        parent_env={"PATH": "/usr/bin:/bin"},
        owner=lambda _: sandbox.run_as,
    )
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        outcome = await preparer.prepare(
            name="bench/setup", repo=repo / ".git", base="HEAD", setup=SETUP
        )
        seconds.append(time.perf_counter() - started)
        if not outcome.ok:
            raise SystemExit(f"setup failed under {mode}: {outcome.failed}")
    print(f"  1. setup: first job {seconds[0]:.2f} s, second job {seconds[1]:.3f} s (reused)")
    prepared = outcome.prepared()
    assert prepared is not None
    work = home / "wt"
    shutil.copytree(repo, work, ignore=shutil.ignore_patterns(".git", "wheels"))
    os.chmod(work, 0o755)
    own(work, sandbox.run_as)
    added = await per_call(sandbox, work, prepared, calls)
    tools = tools_for(sandbox, work, prepared)
    started = time.perf_counter()
    said = await tools.shell.command("python -m pytest -q -p no:cacheprovider")
    took = time.perf_counter() - started
    passed = "1 passed" in said
    verdict = "passed" if passed else "FAILED"
    print(f"  3. `python -m pytest -q` in a task's worktree: {took:.2f} s ({verdict})")
    await sandbox.close()
    if not passed:
        raise SystemExit(f"the test did not pass under {mode}:\n{said}")
    return added


def tools_for(sandbox: Sandbox, work: Path, prepared: Prepared | None) -> WorktreeTools:
    return WorktreeTools(
        work,
        parent_env={"PATH": "/usr/bin:/bin"},
        sandbox=sandbox,
        run_as=sandbox.run_as,
        prepared=prepared,
    )


async def per_call(sandbox: Sandbox, work: Path, prepared: Prepared, calls: int) -> float:
    print(f"  2. one shell call `true`, ms (N={calls}){'median':>14}{'p90':>9}")
    medians = {}
    for label, shown in (("without the environment", None), ("with it", prepared)):
        found = await times_of(tools_for(sandbox, work, shown), "true", calls)
        medians[label] = statistics.median(found)
        print(f"     {label:38}{medians[label]:9.1f}{found[int(len(found) * 0.9) - 1]:9.1f}")
    added = medians["with it"] - medians["without the environment"]
    print(f"     added at the median: {added:+.1f} ms")
    return added


async def main(quick: bool, calls: int | None) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-setup-", dir="/tmp") as folder:
        base = Path(folder)
        os.chmod(base, 0o711)
        repo = repository(base)
        added = {}
        for mode in ("bwrap", "landlock"):
            found = await one_mode(mode, base, repo, calls or (20 if quick else 60))
            if found is not None:
                added[mode] = found
    if "bwrap" not in added:
        print("verdict: bubblewrap is not available here; the goal is not measured")
        return 0
    met = added["bwrap"] <= GOAL_MS
    print(
        f"verdict: the prepared environment adds {added['bwrap']:+.1f} ms a call at the median "
        f"under bubblewrap (goal <= {GOAL_MS:.0f}): {'met' if met else 'NOT met'}"
    )
    print(f"python {sys.version.split()[0]}; {os.cpu_count()} cores")
    return 0 if met or quick else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer calls")
    parser.add_argument("--calls", type=int, help="shell calls with and without the environment")
    arguments = parser.parse_args()
    raise SystemExit(asyncio.run(main(arguments.quick, arguments.calls)))
