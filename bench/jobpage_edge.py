"""The job page's live streams beside the webhook edge (part of bench/jobpage.py).

    python bench/jobpage_edge.py HOME [--streams N] [--deliveries D]

A server process serves, on the HTTP stack of `teaparty serve` with its default bounds (128
connections, 16 per client; bot.server.http_server.app_server, the stream room on), both the
webhook endpoint (bot.server.endpoint.create_app over the store in HOME, a real secret) and
the job page's live stream of job 1 in HOME (bot.job_viewer.Viewer.live, as the served pages
use it; the sign-in is left out). The bench opens N streams from 127.0.0.1 (one client,
many more than its 16 connections) and, while they stay open, sends D signed `issues.labeled`
deliveries, 8 at a time, each on a connection of its own as GitHub does. Baseline, same run:
the same deliveries with no stream open. Printed: deliveries accepted (202) and their time to
answer (median, p99).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.handlers.payloads import HANDLED_EVENTS  # noqa: E402
from bot.job_pages import STREAM_PATH  # noqa: E402
from bot.job_viewer import Viewer  # noqa: E402
from bot.server.endpoint import create_app  # noqa: E402
from bot.server.http_server import app_server  # noqa: E402
from bot.server.webhooks import signature  # noqa: E402
from bot.settings import Settings  # noqa: E402
from orchestrator.api import shipped_org_dir  # noqa: E402
from orchestrator.store.deliveries import DeliveryQueue  # noqa: E402
from orchestrator.store.sqlite import Store  # noqa: E402

SECRET = "bench-edge-secret"
PAYLOAD = ROOT / "tests" / "payloads" / "issues.labeled.json"
AT_ONCE = 8


async def serve(home: Path, fd: int) -> None:
    """The server (child process): webhooks and job 1's live stream, until stdin closes."""
    store = await Store.open(home / "teaparty.db")
    app = create_app(DeliveryQueue(store), secret=SECRET, events=HANDLED_EVENTS)
    settings = Settings(app_id="bench", private_key="", webhook_secret="", home=home)
    viewer = Viewer(home, org_dir=shipped_org_dir(), env={}, token="", live_streams=256)
    app.get("/jobs/{job_id}/live")(viewer.live)
    listener = socket.socket(fileno=fd)
    server = app_server(app, settings, listener, stream_path=STREAM_PATH, stopping=viewer.close)
    server.config.log_level = "warning"

    async def stop_at_eof() -> None:
        await asyncio.to_thread(sys.stdin.buffer.read)
        server.should_exit = True

    try:
        async with viewer.lifespan(app), asyncio.TaskGroup() as tasks:
            tasks.create_task(stop_at_eof())
            await server.serve(sockets=[listener])
    finally:
        await store.close()


async def open_stream(port: int, job: int) -> tuple[asyncio.StreamWriter, bool]:
    """One live page: its connection, and whether its first event came."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(f"GET /jobs/{job}/live HTTP/1.1\r\nHost: bench\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        return writer, False
    await reader.readuntil(b"event: page")
    return writer, True


async def deliver(port: int, body: bytes) -> tuple[int, float]:
    """One signed delivery on its own connection: its status and ms to the answer."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    head = (
        f"POST /webhook HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nX-GitHub-Event: issues\r\n"
        f"X-GitHub-Delivery: {uuid.uuid4()}\r\nX-Hub-Signature-256: {signature(SECRET, body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    writer.write(head.encode() + body)
    status = await reader.readuntil(b"\r\n")
    elapsed = (time.perf_counter() - started) * 1000
    writer.close()
    return int(status.split()[1]), elapsed


async def load(
    port: int, *, streams: int, deliveries: int
) -> tuple[int, Counter[int], list[float]]:
    """Open `streams` live pages, send `deliveries` while they are open; what came of it."""
    body = json.dumps(json.loads(PAYLOAD.read_bytes()), separators=(",", ":")).encode()
    opened = [await open_stream(port, 1) for _ in range(streams)]
    gate = asyncio.Semaphore(AT_ONCE)

    async def one() -> tuple[int, float]:
        async with gate:
            return await deliver(port, body)

    answers = await asyncio.gather(*(one() for _ in range(deliveries)))
    for writer, _ in opened:
        writer.close()
    return sum(ok for _, ok in opened), Counter(s for s, _ in answers), [ms for _, ms in answers]


def measure(home: Path, *, streams: int, deliveries: int) -> tuple[int, Counter[int], list[float]]:
    """A fresh server process; the load against it."""
    listener = socket.create_server(("127.0.0.1", 0), backlog=1024)
    port = listener.getsockname()[1]
    child = subprocess.Popen(
        [sys.executable, __file__, str(home), "--serve", str(listener.fileno())],
        stdin=subprocess.PIPE,
        pass_fds=[listener.fileno()],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        return asyncio.run(_when_ready(port, streams=streams, deliveries=deliveries))
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)
        listener.close()


async def _when_ready(
    port: int, *, streams: int, deliveries: int
) -> tuple[int, Counter[int], list[float]]:
    for _ in range(600):
        with contextlib.suppress(OSError):
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            break
        await asyncio.sleep(0.05)
    await deliver(port, b"{}")  # warm: one delivery before the measured ones
    return await load(port, streams=streams, deliveries=deliveries)


def report(home: Path, *, streams: int, deliveries: int) -> bool:
    """Print both runs; whether every delivery was accepted with the streams open."""
    print(f"\n{'live streams open':<20}{'opened':>8}{'accepted':>10}{'p50 ms':>9}{'p99 ms':>9}")
    ok = True
    for count in (0, streams):
        opened, statuses, times = measure(home, streams=count, deliveries=deliveries)
        times.sort()
        p99 = times[min(len(times) - 1, int(len(times) * 0.99))]
        accepted = statuses[202]
        print(f"{count:<20}{opened:>8}{accepted:>6}/{deliveries:<3}"
              f"{statistics.median(times):>9.1f}{p99:>9.1f}")  # fmt: skip
        ok = ok and accepted == deliveries and opened == count
        if accepted != deliveries:
            print(f"  statuses: {dict(statuses)}")
    print(f"{deliveries} signed deliveries, {AT_ONCE} at a time, each on its own connection; "
          "streams and deliveries from one address (127.0.0.1)")  # fmt: skip
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("home", type=Path)
    parser.add_argument("--streams", type=int, default=100)
    parser.add_argument("--deliveries", type=int, default=200)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve is not None:
        asyncio.run(serve(args.home, args.serve))
        return 0
    return 0 if report(args.home, streams=args.streams, deliveries=args.deliveries) else 1


if __name__ == "__main__":
    sys.exit(main())
