"""Review rounds on GitHub: the App's API calls and the model's tokens per round, by threads.

    python bench/rounds.py [--quick] [--sizes 1 5 20 150]

The App runs in this process (`teaparty serve`'s runtime, webhooks on a loopback port)
against the local GitHub stand-in, with the offline demo organisation as its model. For
each size N, a new issue is labelled and run until its pull request is open and its job
rests (the issue's text has enough lines that the file the demo writes has N of them);
then alice (a maintainer) submits one `changes_requested` review with a body and N inline
comments, one on each of the file's first N lines. The round is measured from that review
until its summary is on the pull request and the tracking comment shows the job resting
after it, and the App has been quiet for a moment (its own replies come back as webhooks).

Counted: every request the stand-in answered with the App's credentials (REST and GraphQL
apart); every model call of the round, each billed a fixed TOKENS_PER_CALL input tokens by
a wrapper (the demo model reports none), checked against what the engine recorded for the
job, and what the calls were sent (characters / 4), which grows with N. The demo lead
answers every point in one turn, so the number of calls does not. Baseline: the N=1 round
of the same run. Goal (issue 15): API calls grow by at most 2 per addressed thread, and a
150-thread round reads them all (each of the N threads is a point of the round and gets
exactly one reply). Exits 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import httpx

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub
from bot.github.tracking import MARKER_PREFIX
from bot.server.runtime import Runtime, server
from bot.settings import Settings
from orchestrator.agents.context import estimate_tokens
from orchestrator.api import AgentDef, AssistantTurn, DemoModel, Model, ModelRequest, probe
from orchestrator.core.messages import Usage

OWNER, REPO, DECIDER, APP_ID = "octo", "widgets", "alice", 4242
SECRET = "bench-rounds-secret"
SIZES, QUICK_SIZES = (1, 5, 20, 150), (1, 20)
TOKENS_PER_CALL = 1_000  # billed per model call: the demo model reports no usage
GOAL_PER_THREAD = 2  # API calls a round may add per addressed thread
QUIET_S = 0.5  # no App request for this long: the round's consequences are over
LIMIT_S = 300.0  # per wait
# The project names its test command: the engine runs it on each task's commit, the job
# branch, and the head each round pushes (its time is in each round's wall seconds).
PROJECT = (
    "humans: {decider: alice}\ngates: {plan: never}\n"
    "setup: {test: python3 -m unittest -q test_readme}\n"
)
TEST_README = """import pathlib
import unittest


class Readme(unittest.TestCase):
    def test_readme_names_the_package(self):
        self.assertIn("widgets", pathlib.Path("README.md").read_text())
"""


class Billed:
    """The demo organisation, each call billed TOKENS_PER_CALL input tokens and counted, with
    the size of what it was sent (characters / 4: what a real model would read)."""

    def __init__(self) -> None:
        self.demo = DemoModel()
        self.calls = 0
        self.sent = 0

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        self.calls += 1
        self.sent += estimate_tokens(request.messages) + len(request.system) // 4
        turn = await self.demo.complete(request)
        return replace(turn, usage=Usage(input_tokens=TOKENS_PER_CALL))


@dataclass(frozen=True)
class Round:
    """What one review round of N threads cost."""

    threads: int
    rest: int
    graphql: int
    model_calls: int
    tokens: int
    sent: int  # estimated tokens of what the model calls were sent
    read: int  # threads the round took as points
    replied_once: int  # threads with exactly one reply from the App
    seconds: float
    operations: collections.Counter[str]

    @property
    def calls(self) -> int:
        return self.rest + self.graphql


@dataclass
class World:
    hub: FakeGitHub
    runtime: Runtime
    model: Billed
    url: str


# --- the App and the stand-in --------------------------------------------------------------


def source_repo(path: Path) -> Path:
    """The repository the jobs work on: a README and the project file."""
    (path / ".teaparty").mkdir(parents=True)
    (path / ".teaparty" / "project.yaml").write_text(PROJECT)
    (path / "README.md").write_text("widgets\n")
    (path / "test_readme.py").write_text(TEST_README)
    identity = ["-c", "user.name=Bench", "-c", "user.email=bench@example.invalid"]
    for args in (["init", "-q", "-b", "main"], ["add", "."], [*identity, "commit", "-qm", "init"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return path


@contextlib.asynccontextmanager
async def world(root: Path) -> AsyncIterator[World]:
    """The stand-in with octo/widgets and the App serving webhooks in this process."""
    pem, port = private_key_pem(), free_port()
    hub = FakeGitHub(
        root / "hub",
        app_id=APP_ID,
        private_key_pem=pem,
        webhook_url=f"http://127.0.0.1:{port}/webhook",
        webhook_secret=SECRET,
    )
    hub.add_repo(OWNER, REPO, source=source_repo(root / "src"))
    hub.add_user(DECIDER, "admin")
    model = Billed()
    async with hub.serve() as api_url:
        settings = Settings(
            app_id=str(APP_ID),
            private_key=pem,
            webhook_secret=SECRET,
            home=root / "home",
            api_url=api_url,
            server_url=hub.server_url,
            write_interval_s=0.0,
            status_interval_s=0.5,
        )

        def models(agent: AgentDef) -> Model:
            return model

        # the host's sandbox: the engine runs the project's test command in it
        sandbox = await probe(dict(os.environ), home=root / "home")
        runtime = await Runtime.open(
            settings, models=models, env={}, scripted=True, sandbox=sandbox
        )
        app = server(runtime.app, host="127.0.0.1", port=port, quiet=True)
        running = asyncio.create_task(runtime.run(app))
        try:
            await until(lambda: app.started, what="the App to start")
            await runtime.catchup.passed.wait()
            yield World(hub, runtime, model, f"http://127.0.0.1:{port}")
        finally:
            app.should_exit = True
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await runtime.close()
    if hub.violations:
        raise SystemExit(f"the stand-in saw requests GitHub would refuse: {hub.violations}")


async def until(check: Callable[[], object], *, what: str, limit: float = LIMIT_S) -> None:
    """Wait until `check()` is truthy (awaiting it if it is a coroutine)."""
    deadline = time.monotonic() + limit
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def quiet(w: World) -> None:
    """Wait until no delivery is pending and the App has made no request for QUIET_S."""

    async def settled() -> bool:
        async with httpx.AsyncClient() as http:
            health = (await http.get(w.url + "/healthz")).json()
        if int(health["pending_deliveries"]):
            return False
        seen = len(w.hub.requests)
        await asyncio.sleep(QUIET_S)
        return len(w.hub.requests) == seen

    await until(settled, what="the App to be quiet")


def app_comments(hub: FakeGitHub, number: int, kind: str) -> list[str]:
    return [c.body for c in hub.comments(OWNER, REPO, number) if MARKER_PREFIX + kind in c.body]


def resting(hub: FakeGitHub, issue: int, rounds: int) -> bool:
    """Whether the issue's tracking comment shows its job resting (after `rounds` rounds)."""
    tracking = app_comments(hub, issue, "job:")
    if not tracking or "✅" not in tracking[0]:
        return False
    return rounds == 0 or (
        f"round {rounds} (`@{DECIDER}`)" in tracking[0] and "; pushed" in tracking[0]
    )


# --- one round -----------------------------------------------------------------------------


async def delivered_job(w: World, lines: int) -> tuple[int, int, str]:
    """A new issue run to its pull request, its job resting: (issue, pull, the file written)."""
    hub = w.hub
    title = f"Notes for {lines} threads"
    body = "\n".join(f"Note {k} of the request." for k in range(1, lines + 1))
    issue = hub.open_issue(OWNER, REPO, title=title, body=body, author=DECIDER)
    pulls = len(hub.pulls(OWNER, REPO))
    await hub.label_issue(OWNER, REPO, issue, "teaparty", sender=DECIDER)
    await until(lambda: len(hub.pulls(OWNER, REPO)) > pulls, what=f"issue {issue}'s PR")
    await until(lambda: resting(hub, issue, 0), what=f"issue {issue}'s job to rest")
    number = hub.pulls(OWNER, REPO)[-1].number
    return issue, number, f"docs/requests/notes-for-{lines}-threads.md"


def file_lines(hub: FakeGitHub, number: int, path: str) -> int:
    pull = hub.issue(OWNER, REPO, number).pull
    assert pull is not None
    text = subprocess.run(
        ["git", "-C", str(hub.root / OWNER / f"{REPO}.git"), "show", f"{pull.head_ref}:{path}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return len(text.splitlines())


def replied_once(hub: FakeGitHub, number: int) -> int:
    """Threads of the pull request in which the App replied exactly once."""
    pull = hub.issue(OWNER, REPO, number).pull
    assert pull is not None
    once = 0
    for thread in hub.review_threads(OWNER, REPO, number):
        authors = [pull.reviews.comments[c].author for c in thread.comment_ids]
        once += sum(a.endswith("[bot]") for a in authors) == 1
    return once


async def measure(w: World, threads: int) -> Round:
    """One round of `threads` inline comments on a freshly delivered job's pull request."""
    hub = w.hub
    issue, number, path = await delivered_job(w, threads)
    if (have := file_lines(hub, number, path)) < threads:
        raise SystemExit(f"{path} has {have} lines, fewer than {threads} threads")
    office = w.runtime.office
    record = await office.records.job_for_key(f"github:{OWNER}/{REPO}#{issue}")
    assert record is not None
    await quiet(w)
    mark, calls, sent = len(hub.requests), w.model.calls, w.model.sent
    spent = await office.budget.spent(record.job_id)
    comments = [(path, k, f"Point {k}: please reword line {k}.") for k in range(1, threads + 1)]
    started = time.perf_counter()
    await hub.review_pr(
        OWNER,
        REPO,
        number,
        DECIDER,
        "changes_requested",
        "See the inline comments.",
        comments=comments,
    )
    await until(lambda: app_comments(hub, number, "round:"), what=f"#{number}'s round summary")
    await until(lambda: resting(hub, issue, 1), what=f"issue {issue}'s job to rest again")
    seconds = time.perf_counter() - started
    await quiet(w)
    made = [r for r in hub.requests[mark:] if r.auth != "none"]
    graphql = sum((r.operation_id or "").startswith("graphql") for r in made)
    tokens = (await office.budget.spent(record.job_id)).tokens - spent.tokens
    (taken,) = await office.rounds.of_job(record.job_id)
    model_calls = w.model.calls - calls
    if tokens != model_calls * TOKENS_PER_CALL:
        raise SystemExit(f"the engine recorded {tokens} tokens for {model_calls} billed calls")
    return Round(
        threads=threads,
        rest=len(made) - graphql,
        graphql=graphql,
        model_calls=model_calls,
        tokens=tokens,
        sent=w.model.sent - sent,
        read=sum(p.point.thread_id is not None for p in taken.points),
        replied_once=replied_once(hub, number),
        seconds=seconds,
        operations=collections.Counter(f"{r.method} {r.operation_id or r.path}" for r in made),
    )


# --- the report ----------------------------------------------------------------------------


def marginal(a: Round, b: Round) -> float:
    """API calls each thread added between two sizes."""
    return (b.calls - a.calls) / (b.threads - a.threads)


def report(rounds: Sequence[Round]) -> bool:
    """Print the table and the goal's verdict; whether the goal is met."""
    base = rounds[0]
    print(
        f"\nOne review round of N inline comments (N threads); baseline: the N={base.threads}"
        f" round of this run. Billed tokens: each model call billed {TOKENS_PER_CALL:,} input"
        " tokens by a wrapper (the demo model reports none), as the engine recorded them; sent:"
        " what the calls were sent, characters / 4.\n"
    )
    print(
        "| N | API calls (REST + GraphQL) | / baseline | per thread beyond N=1"
        " | per thread from previous | threads read | answered once | model calls"
        " | billed tokens | sent tokens | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for previous, r in zip([None, *rounds], rounds, strict=False):
        beyond = "—" if r is base else f"{marginal(base, r):.2f}"
        step = "—" if previous is None else f"{marginal(previous, r):.2f}"
        print(
            f"| {r.threads} | {r.calls} ({r.rest} + {r.graphql}) | {r.calls / base.calls:.2f}"
            f" | {beyond} | {step} | {r.read} | {r.replied_once} | {r.model_calls}"
            f" | {r.tokens:,} | {r.sent:,} | {r.seconds:.1f} |"
        )
    last = rounds[-1]
    print(f"\nRequests of the N={base.threads} and N={last.threads} rounds, by operation:")
    for op in sorted(set(base.operations) | set(last.operations)):
        print(f"  {base.operations[op]:>4} {last.operations[op]:>4}  {op}")
    return verdict(rounds)


def verdict(rounds: Sequence[Round]) -> bool:
    """Print PASS or FAIL for the goal; whether it is met."""
    worst = max((marginal(a, b) for a, b in zip(rounds, rounds[1:], strict=False)), default=0.0)
    all_read = all(r.read == r.replied_once == r.threads for r in rounds)
    biggest = max(r.threads for r in rounds)
    met = worst <= GOAL_PER_THREAD and all_read
    print(
        f"\n{'PASS' if met else 'FAIL'}: at most {worst:.2f} API calls per added thread"
        f" (goal <= {GOAL_PER_THREAD}); every thread read and answered exactly once: "
        f"{'yes' if all_read else 'no'}, up to {biggest} threads"
        + ("" if biggest >= 150 else " (the goal's 150 are measured by the full run)")
    )
    return met


async def main(sizes: Sequence[int]) -> int:
    with tempfile.TemporaryDirectory(prefix="teaparty-bench-rounds-") as name:
        async with world(Path(name)) as w:
            rounds = []
            for n in sizes:
                rounds.append(r := await measure(w, n))
                print(
                    f"N={n}: {r.calls} API calls ({r.rest} REST, {r.graphql} GraphQL),"
                    f" {r.model_calls} model calls, {r.seconds:.1f} s",
                    flush=True,
                )
        checks = engine_checks(Path(name) / "home")
    met = report(rounds)
    print(checks)
    return 0 if met else 1


def engine_checks(home: Path) -> str:
    """What the engine's runs of the project's test command added: runs, statuses, time."""
    with sqlite3.connect(home / "teaparty.db") as db:
        rows = db.execute("SELECT task, status, record FROM checks").fetchall()
    seconds = sum(run["seconds"] for *_, record in rows for run in json.loads(record)["runs"])
    statuses = collections.Counter(status for _, status, _ in rows)
    jobs = sum(task is None for task, *_ in rows)
    said = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    return (
        f"\nEngine-run checks: {len(rows)} runs of the project's test command ({said}; "
        f"{jobs} of a job branch or a round's head), {seconds:.1f} s in all, 0 model tokens."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help=f"N = {QUICK_SIZES} only")
    parser.add_argument("--sizes", type=int, nargs="+", help=f"default {SIZES}")
    options = parser.parse_args()
    sizes = sorted(set(options.sizes or (QUICK_SIZES if options.quick else SIZES)))
    sys.exit(asyncio.run(main(sizes)))
