"""Benchmark of the job page (`teaparty jobs view`): a big job's page and transcript.

    python bench/jobpage.py [--quick] [--tasks N] [--messages M]

A store holds one job of N tasks (default 50) and M messages (default 10,000) spread over
its office manager, lead and each task's mini-team, worker and reviewer (tool calls with
arguments, long tool results), written by the engine's own owners of those tables. A real
`teaparty jobs view` process serves it on 127.0.0.1; the bench asks as a browser would
(the launch's cookie) and times each answer to its first byte, and counts the page's
weight before any fold is opened (a transcript is a page of its own). The baseline,
measured in the same run: the same server's refusal of a request without the token (no
store read, no page), so the ratio is what the page itself costs over the server's own
overhead.

Then the live streams beside the webhook edge (bench/jobpage_edge.py): deliveries accepted,
and their time to answer, with 100 of the job's live streams open (20 with --quick) and with
none. Exit 1 too when a delivery is refused while the streams are open.

Goals (docs/performance.md): a job page's first byte in under 200 ms, and under 500 KB
before its folds are opened. Exit 1 when the page is heavier than that (its weight does not
depend on the machine's load); the time is printed, not asserted.
"""

from __future__ import annotations

import argparse
import http.client
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import jobpage_edge  # noqa: E402

from orchestrator.bus import jobs as job_rows  # noqa: E402
from orchestrator.bus import transactions as txn  # noqa: E402
from orchestrator.core.messages import ConversationKind, Usage  # noqa: E402
from orchestrator.store.sqlite import Store, Tx  # noqa: E402
from orchestrator.teams import board  # noqa: E402

GOAL_MS = 200.0
GOAL_KB = 500.0
WORDS = "the lead splits the issue into tasks and each mini team reviews its worker".split()


def text(n: int, seed: int) -> str:
    return " ".join(WORDS[(seed + i) % len(WORDS)] for i in range(n))


def fill(tx: Tx, tasks: int, messages: int) -> None:
    """One job: its conversations and messages, spread as a real job's are."""
    job = job_rows.create(
        tx,
        job_key=f"local:{ROOT}:{uuid.uuid4().hex[:12]}",
        project="bench",
        title="A big job for the page",
        max_parallel=4,
        project_text=None,
        learnings=None,
        ready=True,
    )
    root = f"job:{job}"
    txn.create_conversation(tx, conversation_id=root, kind=ConversationKind.JOB,
                            agent="office-manager", initiator="engine", parent_id=None,
                            job_id=job)  # fmt: skip
    lead = f"agent:office-manager:bench/project-lead:{uuid.uuid4()}"
    txn.create_conversation(tx, conversation_id=lead, kind=ConversationKind.DISPATCH,
                            agent="bench/project-lead", initiator="office-manager",
                            parent_id=root, job_id=job)  # fmt: skip
    conversations = [root, lead]
    for number in range(1, tasks + 1):
        board.create_task(
            tx, job, title=f"Task {number}: {text(6, number)}", spec=text(60, number),
            created_by="bench/project-lead", workgroup="coding", review="full",
        )  # fmt: skip
        found = board.find(tx, job, number)
        assert found is not None
        task_id = found[0]
        team = f"task:{job}:{number}:{uuid.uuid4()}"
        txn.create_conversation(tx, conversation_id=team, kind=ConversationKind.TASK,
                                agent="bench/coding/mini-team", initiator="bench/project-lead",
                                parent_id=lead, job_id=job, task_id=task_id)  # fmt: skip
        conversations.append(team)
        for role in ("implementer", "reviewer"):
            member = f"agent:bench/coding/mini-team:bench/coding/{role}:{uuid.uuid4()}"
            txn.create_conversation(tx, conversation_id=member, kind=ConversationKind.DISPATCH,
                                    agent=f"bench/coding/{role}", initiator="mini-team",
                                    parent_id=team, job_id=job)  # fmt: skip
            conversations.append(member)
    per = max(1, messages // len(conversations))
    left = messages
    for index, conversation in enumerate(conversations):
        count = left if index == len(conversations) - 1 else min(per, left)
        left -= count
        entries = []
        for seq in range(count):
            if seq % 3 == 1:
                content = {"text": "", "tool_calls": [{"id": f"c{seq}", "name": "read_file",
                           "args": {"path": f"src/module_{seq}.py"}}]}  # fmt: skip
                entries.append(("agent", "assistant", content, Usage(1200, 80, 900, 0)))
            elif seq % 3 == 2:
                result = {"text": text(400, seq), "call_id": f"c{seq - 1}"}
                entries.append(("agent", "tool", result, None))
            else:
                entries.append(("agent", "user", {"text": text(40, seq)}, None))
        txn.append(tx, conversation, entries)


async def build(home: Path, tasks: int, messages: int) -> None:
    store = await Store.open(home / "teaparty.db")
    try:
        await store.write(lambda tx: fill(tx, tasks, messages))
    finally:
        await store.close()


def ask(url: str, cookie: str | None) -> tuple[float, int, int]:
    """One GET: ms to the first byte of the answer, its status, its body's bytes."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    started = time.perf_counter()
    connection.request("GET", path, headers={"Cookie": cookie} if cookie else {})
    answer = connection.getresponse()
    first = (time.perf_counter() - started) * 1000
    body = answer.read()
    connection.close()
    return first, answer.status, len(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smaller job, fewer requests")
    parser.add_argument("--tasks", type=int)
    parser.add_argument("--messages", type=int)
    args = parser.parse_args()
    tasks = args.tasks or (20 if args.quick else 50)
    messages = args.messages or (2_000 if args.quick else 10_000)
    requests = 10 if args.quick else 30
    with tempfile.TemporaryDirectory(prefix="teaparty-bench-jobpage-") as folder:
        home = Path(folder)
        import asyncio

        started = time.perf_counter()
        asyncio.run(build(home, tasks, messages))
        print(f"a job of {tasks} tasks and {messages:,} messages written in "
              f"{time.perf_counter() - started:.1f} s")  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        viewer = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", "jobs", "view", "1", "--no-open", "--home",
             str(home)], stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        try:
            assert viewer.stdout is not None
            link = viewer.stdout.readline().split(": ", 1)[1].strip()
            base, _, token = link.partition("?token=")
            cookie = f"teaparty_view={token}"
            origin = base.rsplit("/jobs/", 1)[0]
            ask(base, cookie)  # warm: the first read opens the store
            page = [ask(base, cookie) for _ in range(requests)]
            refused = [ask(base, None) for _ in range(requests)]
            listing = [ask(f"{origin}/jobs", cookie) for _ in range(requests)]
            lead = f"{origin}/jobs/1/c/" + "job:1"
            transcript = [ask(lead, cookie) for _ in range(max(3, requests // 3))]
        finally:
            viewer.terminate()
            viewer.wait(timeout=30)
        edge_ok = jobpage_edge.report(
            home, streams=20 if args.quick else 100, deliveries=50 if args.quick else 200
        )
    assert all(status == 200 for _, status, _ in page + listing + transcript)
    assert all(status == 403 for _, status, _ in refused)
    baseline = statistics.median(ms for ms, _, _ in refused)
    weight = page[0][2] / 1024
    rows = [
        ("job page, first byte (median), ms", statistics.median(ms for ms, _, _ in page)),
        ("jobs list, first byte (median), ms", statistics.median(ms for ms, _, _ in listing)),
        ("a transcript, first byte (median), ms",
         statistics.median(ms for ms, _, _ in transcript)),
    ]  # fmt: skip
    print(f"{'measure':<42}{'page':>10}{'baseline':>10}{'ratio':>8}")
    for name, value in rows:
        print(f"{name:<42}{value:>10.1f}{baseline:>10.1f}{value / baseline:>8.1f}")
    print(f"{'job page weight, KB (before folds open)':<42}{weight:>10.1f}")
    print(f"{'the transcript page, KB':<42}{transcript[0][2] / 1024:>10.1f}")
    print(f"baseline: the same server refusing a request without its token ({requests} each)")
    first = statistics.median(ms for ms, _, _ in page)
    print(f"goal: first byte < {GOAL_MS:g} ms: {'met' if first < GOAL_MS else 'missed'}; "
          f"weight < {GOAL_KB:g} KB: {'met' if weight < GOAL_KB else 'MISSED'}")  # fmt: skip
    return 0 if weight < GOAL_KB and edge_ok else 1


if __name__ == "__main__":
    sys.exit(main())
