"""Benchmark of durable webhook ingest against a bare FastAPI endpoint, measured in one run.

    python bench/webhooks.py [--quick] [--seconds S] [--repeats R] [--client wrk|python]
                             [--loop uvloop|asyncio] [--http httptools|teaparty]

For concurrency 1, 16 and 64, each endpoint gets its own uvicorn process (1 worker, uvloop
+ httptools, access log off) on a pre-bound loopback socket, started fresh for each point:
- bare: a FastAPI POST that reads the body and answers 202 (the baseline);
- durable: `bot.server.endpoint.create_app` over a fresh Store (WAL, synchronous=FULL) in a temp
  dir, with a real secret: each request is a signed `issues.labeled` delivery with its own
  X-GitHub-Delivery, so every one is verified, parsed, committed and only then answered.
The load comes from wrk (one thread, a Lua `request()` that numbers the delivery ids) when
it is installed, else from an asyncio keep-alive client in this process. A point is a 1 s
warm-up, then R runs (default 1) of S seconds (default 5). Afterwards every acknowledged
delivery id is looked up in the store. `--loop asyncio` serves both endpoints on the
stdlib event loop, as `bot.server.runtime.server` does today. `--http teaparty` serves both with
the HTTP stack of `teaparty serve` (`bot.server.http_server.app_server`: h11, the request
deadline, the head and connection bounds) instead of httptools.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import http.client
import io
import json
import os
import secrets
import shutil
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
import uvloop
from fastapi import FastAPI, Request, Response
from webhooks_load import (
    Client,
    Load,
    python_load,
    wrk_load,
)

from bot.handlers.payloads import HANDLED_EVENTS
from bot.server.endpoint import create_app
from bot.server.http_server import app_server
from bot.server.webhooks import signature
from bot.settings import Settings
from orchestrator.store.deliveries import DeliveryQueue
from orchestrator.store.sqlite import Store

ROOT = Path(__file__).resolve().parent.parent
PAYLOAD = ROOT / "tests" / "payloads" / "issues.labeled.json"
SECRET_ENV = "TEAPARTY_BENCH_SECRET"
CONCURRENCIES = (1, 16, 64)
# --- the servers (run in their own process) --------------------------------------------------


def bare_app() -> FastAPI:
    """The baseline: FastAPI reading the body and answering 202, nothing else."""
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)

    @app.post("/webhook", status_code=202)
    async def webhook(request: Request) -> Response:
        await request.body()
        return Response(status_code=202)

    return app


async def serve(mode: str, fd: int, db: Path | None, *, loop: str, http: str) -> None:
    """Serve `mode` on the listening socket `fd` until stdin closes; close the store after."""
    store = await Store.open(db) if mode == "durable" and db else None
    app = (
        bare_app()
        if store is None
        else create_app(DeliveryQueue(store), secret=os.environ[SECRET_ENV], events=HANDLED_EVENTS)
    )
    listener = socket.socket(fileno=fd)
    if http == "teaparty":
        # every client of the bench is one address: bound it only overall, as its load is
        settings = Settings(
            app_id="bench",
            private_key="",
            webhook_secret="",
            home=ROOT,
            max_connections_per_client=Settings.max_connections,
        )
        server = app_server(app, settings, listener)
        server.config.log_level = "warning"
    else:
        config = uvicorn.Config(
            app, loop=loop, http="httptools", lifespan="off", access_log=False,
            log_level="warning",
        )  # fmt: skip
        server = uvicorn.Server(config)

    async def stop_at_eof() -> None:  # not a signal: uvicorn re-raises those after shutdown
        await asyncio.to_thread(sys.stdin.buffer.read)
        server.should_exit = True

    try:
        async with asyncio.TaskGroup() as tasks:
            tasks.create_task(stop_at_eof())
            await server.serve(sockets=[listener])
    finally:
        if store is not None:
            await store.close()


@contextlib.contextmanager
def served(mode: str, db: Path, options: argparse.Namespace, log: Path) -> Iterator[int]:
    """A server process for `mode` on a free loopback port; yields the port."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    args = [sys.executable, __file__, "--serve", mode, "--fd", str(listener.fileno())]
    env = {**os.environ, SECRET_ENV: options.secret}
    with log.open("ab") as err:
        child = subprocess.Popen(
            [*args, "--db", str(db), "--loop", options.loop, "--http", options.http],
            pass_fds=[listener.fileno()],
            stdin=subprocess.PIPE,
            stderr=err,
            env=env,
            cwd=ROOT,
        )
    listener.close()  # the child's copy is the only one: a dead child refuses connections
    try:
        wait_ready(port, child, log)
        yield port
    finally:
        assert child.stdin is not None
        child.stdin.close()
        if child.wait(timeout=60) != 0:
            raise RuntimeError(f"{mode} server exited {child.returncode}: {log.read_text()}")


def wait_ready(port: int, child: subprocess.Popen[bytes], log: Path) -> None:
    for _ in range(300):
        if child.poll() is not None:
            raise RuntimeError(f"server exited {child.returncode}: {log.read_text()}")
        with contextlib.suppress(OSError):
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", "/healthz")  # the bare server's 404 says it serves too
            conn.getresponse().read()
            conn.close()
            return
        time.sleep(0.05)
    raise RuntimeError(f"server on port {port} did not answer: {log.read_text()}")


# --- the clients -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Point:
    """One endpoint at one concurrency: its runs pooled, and each run's p99."""

    load: Load
    p99s: list[float]
    stored: Stored | None = None


@dataclass(frozen=True)
class Stored:
    """The store after a durable point: its rows beside the deliveries acknowledged."""

    rows: int
    acked: int
    missing: int  # acknowledged with 202 but not in the store: must be 0


def pooled(runs: list[Load]) -> Load:
    """All runs' responses over all their time; the median p50, the worst p99 (a bound)."""
    load = Load(
        sum(r.responses for r in runs),
        sum(r.seconds for r in runs),
        statistics.median(r.p50_ms for r in runs),
        max(r.p99_ms for r in runs),
        sum(r.errors for r in runs),
    )
    for run in runs:
        load.statuses.update(run.statuses)
        load.acked += run.acked
    return load


def measure(
    mode: str, connections: int, *, client: Client, options: argparse.Namespace, work: Path
) -> Point:
    """Start a fresh server, warm it up, load it; for durable, check the store after."""
    db = work / f"{mode}-{connections}" / "teaparty.db"
    with served(mode, db, options, work / "server.log") as port:
        run = {"port": port, "connections": connections, "work": work}
        warm = client(**run, seconds=options.warmup, prefix=f"{mode}{connections}w")
        runs = [
            client(**run, seconds=options.seconds, prefix=f"{mode}{connections}r{n}")
            for n in range(options.repeats)
        ]
    load = pooled(runs)
    for got in (warm, load):
        bad = {s: n for s, n in got.statuses.items() if s != 202}
        if bad or got.errors:
            raise RuntimeError(f"{mode} c={connections}: statuses {bad}, {got.errors} errors")
    point = Point(load, [r.p99_ms for r in runs])
    if mode != "durable":
        return point
    with contextlib.closing(sqlite3.connect(db)) as conn:
        rows = {r[0] for r in conn.execute("SELECT delivery_id FROM deliveries")}
    acked = warm.acked + load.acked
    if len(acked) != warm.statuses[202] + load.statuses[202]:
        raise RuntimeError(f"durable c={connections}: a 202 without a delivery id")
    return Point(load, point.p99s, Stored(len(rows), len(acked), len(set(acked) - rows)))


def prepare(work: Path, secret: str) -> int:
    """Write the compact payload (as GitHub sends it) and its signature; return its size."""
    body = json.dumps(json.loads(PAYLOAD.read_bytes()), separators=(",", ":")).encode()
    (work / "body.json").write_bytes(body)
    (work / "signature").write_text(signature(secret, body))
    return len(body)


Results = dict[int, tuple[Point, Point]]


def report(results: Results, *, client: str, size: int, options: argparse.Namespace) -> None:
    print(f"\n{'concurrency':>11}  {'bare req/s':>10} {'p50 ms':>7} {'p99 ms':>7} | ", end="")
    print(f"{'durable req/s':>13} {'p50 ms':>7} {'p99 ms':>7} | {'ratio':>5}")
    for c, (bare, ours) in results.items():
        b, o = bare.load, ours.load
        print(f"{c:>11}  {b.rate:>10,.0f} {b.p50_ms:>7.2f} {b.p99_ms:>7.2f} | ", end="")
        print(f"{o.rate:>13,.0f} {o.p50_ms:>7.2f} {o.p99_ms:>7.2f} | {o.rate / b.rate:>5.2f}")
    top = max(results)
    bare, ours = (p.load.p99_ms for p in results[top])
    print(f"p99 at c={top}: durable {ours:.1f} ms / bare {bare:.1f} ms = {ours / bare:.1f}x")
    print(f"client: {client}; body {size:,} bytes, each request a new X-GitHub-Delivery")
    stack = "httptools" if options.http == "httptools" else "h11 as in `teaparty serve`"
    print(f"server: uvicorn, 1 worker, {options.loop} + {stack}, access log off")
    if options.repeats > 1:
        print(f"{options.repeats} runs a point: req/s pooled, p50 the median run's, p99 the worst")
        for c, (bare, ours) in results.items():
            print(f"  p99 by run, c={c:<3} bare {_ms(bare.p99s):<24} durable {_ms(ours.p99s)}")
    print("\nstored-row check (durable, warm-up included):")
    for c, (_, ours) in results.items():
        s = ours.stored
        assert s is not None
        print(
            f"  c={c:<3} 202s {s.acked:>7,}  rows {s.rows:>7,}  acknowledged, not stored:"
            f" {s.missing}  stored, no 202 read: {s.rows - s.acked}"
        )
    if options.client == "wrk":
        print("  (wrk stops with up to c requests in flight a run: stored, but never read)")
    verdicts(results)


def _ms(values: list[float]) -> str:
    return " ".join(f"{v:.1f}" for v in values)


def verdicts(results: Results) -> None:
    ratios = {c: ours.load.rate / bare.load.rate for c, (bare, ours) in results.items()}
    worst = min(ratios, key=ratios.__getitem__)
    top = max(results)
    p99 = results[top][1].load.p99_ms
    missing = sum(ours.stored.missing for _, ours in results.values() if ours.stored)
    print("\nverdicts:")
    met = "met" if ratios[worst] >= 0.8 else "NOT met"
    shown = ", ".join(f"{r:.2f} at c={c}" for c, r in ratios.items())
    print(f"  durable >= 80% of bare throughput: {met} ({shown})")
    met = "met" if p99 < 50 else "NOT met"
    print(f"  durable p99 < 50 ms at c={top}: {met}, {p99:.1f} ms")
    met = "met" if missing == 0 else "NOT met"
    print(f"  every acknowledged delivery is in the store: {met}, {missing} missing")


def main(options: argparse.Namespace) -> None:
    if options.client is None:
        options.client = "wrk" if shutil.which("wrk") else "python"
    wrk = options.client == "wrk"
    client: Client = wrk_load if wrk else python_load
    about = (
        "wrk (1 thread) on the same 2 cores as the server, unpinned"
        if wrk
        else "asyncio keep-alive client in the bench process: it shares the 2 cores with the server"
    )
    options.secret = secrets.token_hex(20)
    results: Results = {}
    with tempfile.TemporaryDirectory(prefix="teaparty-bench-") as name:
        work = Path(name)
        size = prepare(work, options.secret)
        for c in options.concurrency:
            run = {"client": client, "options": options, "work": work}
            results[c] = (measure("bare", c, **run), measure("durable", c, **run))
            bare, ours = (p.load.rate for p in results[c])
            print(f"c={c}: bare {bare:,.0f} req/s, durable {ours:,.0f} req/s", flush=True)
    report(results, client=about, size=size, options=options)
    api_calls()


CHECK_RUN_CALLS = (
    ("GET", "checks/list-for-ref"),
    ("POST", "checks/create"),
    ("PATCH", "checks/update"),
)


def api_calls() -> None:
    """GitHub API calls of a one-task job from label to PR (the demo, scripted model), with an
    instant model and with one whose calls take 2 s each on the App's clock (simulated)."""
    from bot.demo import run_demo
    from bot.server.catchup import PER_PROCESS_CALLS

    counts: dict[float, collections.Counter[tuple[str, str]]] = {}
    for seconds in (0.0, 2.0):
        seen: collections.Counter[tuple[str, str]] = collections.Counter()

        def count(hub: Any, seen: collections.Counter[tuple[str, str]] = seen) -> None:
            seen.update(
                (r.method, r.operation_id or r.path) for r in hub.requests if r.auth != "none"
            )

        with (
            tempfile.TemporaryDirectory(prefix="teaparty-bench-demo-") as name,
            contextlib.redirect_stdout(io.StringIO()),
        ):
            env = {"PATH": os.environ["PATH"]}
            code = asyncio.run(run_demo(Path(name), env, inspect=count, model_seconds=seconds))
        if code != 0:
            raise SystemExit("the demo failed; run `teaparty demo` to see why")
        counts[seconds] = seen
    instant, slow = counts[0.0], counts[2.0]
    gate = instant["POST", "issues/create-comment"] - 1  # all but the tracking one
    # each answer: the decider's write access checked, and 👍 on their comment
    answers = instant["POST", "reactions/create-for-issue-comment"]
    once = (
        sum(instant["GET", op] for op in PER_PROCESS_CALLS) + instant["GET", "issues/list-for-repo"]
    )
    # the job's `TeaParty` check run: looked for (an earlier process may have made it),
    # created, completed
    check = sum(instant[key] for key in CHECK_RUN_CALLS)
    per_job = sum(instant.values()) - 2 * gate - 2 * answers - once - check
    print(
        f"\nGitHub API calls, one-task job from label to PR: instant model {sum(instant.values())},"
        f" 2 s model {sum(slow.values())} (ratio {sum(slow.values()) / sum(instant.values()):.2f});"
        f" {per_job} per job besides its check run ({check}), each gate's lookup and comment,"
        f" each answer's access check and 👍, and the process's identity and catch-up"
        f" (goal <= 12)"
    )
    for key in sorted(set(instant) | set(slow)):
        method, op = key
        print(f"  {instant[key]:>2} {slow[key]:>2}  {method:<6} {op}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1 s a point")
    parser.add_argument("--seconds", type=int, default=5, help="seconds of each measured run")
    parser.add_argument("--repeats", type=int, default=1, help="measured runs a point")
    parser.add_argument("--warmup", type=int, default=1, help="warm-up seconds a point")
    parser.add_argument("--client", choices=["wrk", "python"], help="default: wrk if installed")
    parser.add_argument(
        "--loop", choices=["uvloop", "asyncio"], default="uvloop", help="the servers' event loop"
    )
    parser.add_argument(
        "--http",
        choices=["httptools", "teaparty"],
        default="httptools",
        help="the servers' HTTP stack: httptools, or that of `teaparty serve` (h11, bounded)",
    )
    parser.add_argument("--serve", choices=["durable", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.serve:
        run = uvloop.run if options.loop == "uvloop" else asyncio.run
        run(serve(options.serve, options.fd, options.db, loop=options.loop, http=options.http))
    else:
        options.concurrency = CONCURRENCIES
        if options.quick:
            options.seconds = 1
        main(options)
