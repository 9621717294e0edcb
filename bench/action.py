"""Runner mode: what one `teaparty action` run costs when it has little to do.

    python bench/action.py [--quick]

Each run is a real `python -m bot.cli action` process given only an event file and the
environment a runner gives, against the local GitHub stand-in (its bare remote keeps the
state ref), as tests/test_action.py runs it. Measured, wall time per process (install
excluded):

- **ignore**: the App's own comment comes back as an event; the run decides from the
  payload alone and exits (goal < 1 s);
- **park**: a bystander comments on a job that is parked at its plan question; the run
  loads the state from the ref, applies the event (it answers nothing), drives the parked
  job (nothing to do) and saves the state by compare-and-swap (goal < 3 s).

Each figure also gives the GitHub API requests the run made (from its summary): what it
spends of GITHUB_TOKEN's 1,000 an hour. Baseline, measured in the same run: `python -c pass`
(the interpreter's own start-up).
Setup (not measured): a labelled issue run to its plan question. Exits 1 when a goal is
missed: on wall time in a full run (what a person waits on an idle runner), on CPU time
(the process and what it waited for, user + system) with `--quick`, which CI runs on a
shared machine where other work stretches wall time by several times but barely changes
what the run itself costs. Both are printed either way.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub

OWNER, REPO, APP_ID = "octo", "widgets", 4242
GOALS = {"ignore": 1.0, "park": 3.0}
PERMISSIONS = {
    "issues": "write",
    "contents": "write",
    "pull_requests": "write",
    "actions": "write",
    "metadata": "read",
}
RUNS = count(7_000_001)


@dataclass
class Took:
    """What one process cost: wall time, and CPU time of it and its waited-for children."""

    wall: float
    cpu: float


async def timed(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[Took, str]:
    """Run a process; what it took and its output (raises when it fails)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    took = Took(wall, cpu)
    if process.returncode:
        raise SystemExit(f"{argv[-1]} failed ({process.returncode}):\n{out.decode()}")
    return took, out.decode()


async def act(
    hub: FakeGitHub, api_url: str, tmp: Path, event: str, body: bytes
) -> tuple[Took, int]:
    """One workflow run; its wall time and the GitHub API requests it made (its summary)."""
    run_id = next(RUNS)
    folder = tmp / f"run-{run_id}"
    folder.mkdir()
    (folder / "event.json").write_bytes(body)
    token = hub.state.issue_token(1, permissions=PERMISSIONS)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env |= {
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(folder / "event.json"),
        "GITHUB_REPOSITORY": f"{OWNER}/{REPO}",
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": hub.server_url,
        "GITHUB_TOKEN": token.token,
        "TEAPARTY_BOT_LOGIN": hub.state.bot.login,
        "TEAPARTY_BOT_APP_ID": str(APP_ID),
        "TEAPARTY_HOME": str(tmp / "home"),
        "RUNNER_TEMP": str(tmp / "runner-temp"),
        "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
    }
    (tmp / "runner-temp").mkdir(exist_ok=True)
    took, _ = await timed([sys.executable, "-m", "bot.cli", "action"], env, folder)
    summary = folder / "summary.md"
    said = re.search(
        r"GitHub API: ([\d,]+) request", summary.read_text() if summary.exists() else ""
    )
    return took, int(said[1].replace(",", "")) if said else 0


def last(hub: FakeGitHub, event: str) -> dict[str, object]:
    body = next(d.body for d in reversed(hub.deliveries) if d.event == event)
    found = json.loads(body)
    assert isinstance(found, dict)
    return found


async def bench(repeat: int, *, on_cpu: bool) -> int:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        hub = FakeGitHub(
            tmp / "hub",
            app_id=APP_ID,
            private_key_pem=private_key_pem(),
            webhook_url=f"http://127.0.0.1:{free_port()}/webhook",
            webhook_secret="bench",
        )
        hub.add_repo(OWNER, REPO)
        hub.add_user("alice", "admin")
        hub.add_user("bob", "read")
        async with hub.serve() as api_url:
            number = hub.open_issue(
                OWNER, REPO, title="Add a changelog", body="Please.", author="alice"
            )
            await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await act(hub, api_url, tmp, "issues", json.dumps(last(hub, "issues")).encode())
            baseline = [
                (await timed([sys.executable, "-c", "pass"], dict(os.environ), tmp))[0].wall
                for _ in range(repeat)
            ]
            await hub.comment_as(OWNER, REPO, number, "bob", "Looks interesting.")
            comment = last(hub, "issue_comment")
            own = json.loads(json.dumps(comment))
            own["comment"]["user"] |= {"login": hub.state.bot.login, "type": "Bot"}
            figures: dict[str, list[Took]] = {"ignore": [], "park": []}
            requests: dict[str, list[int]] = {"ignore": [], "park": []}
            for n in range(repeat):
                bystander = json.loads(json.dumps(comment))
                bystander["comment"]["id"] = int(bystander["comment"]["id"]) + 1_000 + n
                for name, payload in (("ignore", own), ("park", bystander)):
                    took, used = await act(
                        hub, api_url, tmp, "issue_comment", json.dumps(payload).encode()
                    )
                    figures[name].append(took)
                    requests[name].append(used)
    base = statistics.median(baseline)
    print(f"baseline `python -c pass`: {base * 1000:.0f} ms (median of {repeat})")
    failed = False
    for name, runs in figures.items():
        median = statistics.median(run.wall for run in runs)
        worst = max(run.wall for run in runs)
        cpu = statistics.median(run.cpu for run in runs)
        met = (cpu if on_cpu else median) < GOALS[name]
        failed |= not met
        print(
            f"{name:>6}: median {median * 1000:.0f} ms, worst {worst * 1000:.0f} ms, "
            f"{median / base:.1f}x baseline, CPU {cpu * 1000:.0f} ms; goal < "
            f"{GOALS[name]:.0f} s {'of CPU' if on_cpu else 'of wall time'}: "
            f"{'met' if met else 'MISSED'}; GitHub API requests: {max(requests[name])}"
        )
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 runs of each, not 10")
    args = parser.parse_args()
    return asyncio.run(bench(3 if args.quick else 10, on_cpu=args.quick))


if __name__ == "__main__":
    sys.exit(main())
