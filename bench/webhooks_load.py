"""The load generators bench/webhooks.py drives the endpoint with: wrk, or an asyncio client."""

from __future__ import annotations

import asyncio
import collections
import json
import re
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

_CONTENT_LENGTH = re.compile(rb"content-length:\s*(\d+)", re.IGNORECASE)

# One wrk thread; init() builds the request around its delivery id once, request() only
# splices in the next number, response() counts statuses and keeps the acknowledged ids.
# At c=64 on uvloop, wrk sees in some runs a 100-300 ms tail in 1-3% of the requests, on
# the bare endpoint as much as the durable one (a static wrk request shows it too); with
# `--loop asyncio` it does not, and the asyncio client does not provoke it.
WRK_SCRIPT = r"""
local head, tail, sent, threads = "", "", 0, {}
acked, statuses = {}, {}  -- globals: done() reads them with thread:get
function setup(thread) thread:set("tid", #threads); table.insert(threads, thread) end
function init(args)
  local f = assert(io.open(args[1], "rb")); local body = f:read("*a"); f:close()
  head = "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    .. "User-Agent: GitHub-Hookshot/bench\r\nX-GitHub-Event: issues\r\n"
    .. "X-Hub-Signature-256: " .. args[2] .. "\r\nContent-Length: " .. #body .. "\r\n"
    .. "X-GitHub-Delivery: " .. args[3] .. "-" .. tid .. "-"
  tail = "\r\n\r\n" .. body
end
function request() sent = sent + 1; return head .. sent .. tail end
function response(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
  local id = status == 202 and body:match('"delivery_id":"([^"]+)"')
  if id then acked[#acked + 1] = id end
end
function done(summary, latency, requests)
  local out = assert(io.open(OUT, "w")); local e = summary.errors
  out:write(string.format("load %d %d %d %d %d\n", summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write + e.timeout))
  for _, thread in ipairs(threads) do
    for status, n in pairs(thread:get("statuses")) do out:write("status ", status, " ", n, "\n") end
    for _, id in ipairs(thread:get("acked")) do out:write("ack ", id, "\n") end
  end
  out:close()
end
"""


@dataclass
class Load:
    """What one client run saw: responses, time, latency, statuses, acknowledged ids."""

    responses: int
    seconds: float
    p50_ms: float
    p99_ms: float
    errors: int = 0
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    acked: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.responses / self.seconds


@dataclass(frozen=True)
class Signed:
    """A signed body; `build` makes the request that delivers it under a given id."""

    body: bytes
    signature: str

    def build(self, delivery_id: str) -> bytes:
        head = (
            "POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            "User-Agent: GitHub-Hookshot/bench\r\nX-GitHub-Event: issues\r\n"
            f"X-Hub-Signature-256: {self.signature}\r\nContent-Length: {len(self.body)}\r\n"
            f"X-GitHub-Delivery: {delivery_id}\r\n\r\n"
        )
        return head.encode() + self.body


def wrk_load(port: int, *, connections: int, seconds: float, prefix: str, work: Path) -> Load:
    """Run wrk (1 thread) for `seconds`; ids are `prefix-0-N`."""
    script, out, body = work / "ingest.lua", work / f"{prefix}.out", work / "body.json"
    script.write_text(f"OUT = {json.dumps(str(out))}\n{WRK_SCRIPT}")
    url = f"http://127.0.0.1:{port}/webhook"
    sig = (work / "signature").read_text()
    duration = f"{max(1, round(seconds))}s"
    command = ["wrk", "-t1", f"-c{connections}", f"-d{duration}", "--timeout", "10s"]
    done = subprocess.run(
        [*command, "-s", str(script), url, str(body), sig, prefix], capture_output=True, cwd=work
    )
    if done.returncode != 0:
        raise RuntimeError(f"wrk exited {done.returncode}: {done.stderr.decode()}")
    return parse_wrk(out.read_text())


def parse_wrk(text: str) -> Load:
    lines = text.splitlines()
    responses, duration_us, p50_us, p99_us, errors = map(int, lines[0].split()[1:])
    load = Load(responses, duration_us / 1e6, p50_us / 1e3, p99_us / 1e3, errors)
    for line in lines[1:]:
        kind, *rest = line.split()
        if kind == "status":
            load.statuses[int(rest[0])] += int(rest[1])
        else:
            load.acked.append(rest[0])
    return load


def python_load(port: int, *, connections: int, seconds: float, prefix: str, work: Path) -> Load:
    """An asyncio keep-alive client in this process: it shares the CPU with the server."""
    request = Signed((work / "body.json").read_bytes(), (work / "signature").read_text())
    return asyncio.run(_python_load(port, connections, seconds, prefix, request))


async def _python_load(
    port: int, connections: int, seconds: float, prefix: str, request: Signed
) -> Load:
    latencies: list[int] = []
    load = Load(0, seconds, 0.0, 0.0)
    deadline = time.perf_counter() + seconds
    started = time.perf_counter()
    await asyncio.gather(
        *(_connection(port, f"{prefix}-{n}", request, deadline, latencies, load)
          for n in range(connections))
    )  # fmt: skip
    load.seconds = time.perf_counter() - started
    load.responses = len(latencies)
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    load.p50_ms, load.p99_ms = cuts[49] / 1e6, cuts[98] / 1e6
    return load


async def _connection(
    port: int, prefix: str, request: Signed, deadline: float, latencies: list[int], load: Load
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    sent = 0
    while time.perf_counter() < deadline:
        sent += 1
        delivery_id = f"{prefix}-{sent}"
        began = time.perf_counter_ns()
        writer.write(request.build(delivery_id))
        head = await reader.readuntil(b"\r\n\r\n")
        length = _CONTENT_LENGTH.search(head)
        await reader.readexactly(int(length.group(1)) if length else 0)
        latencies.append(time.perf_counter_ns() - began)
        status = int(head[9:12])
        load.statuses[status] += 1
        if status == 202:
            load.acked.append(delivery_id)
    writer.close()
    await writer.wait_closed()


# --- measuring -------------------------------------------------------------------------------

Client = Callable[..., Load]
