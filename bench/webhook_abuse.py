"""Peak memory of a real `teaparty serve` under abusive webhook posts, beside its idle memory.

    python bench/webhook_abuse.py [--quick] [--clients N] [--mb M] [--root DIR]

Starts `teaparty serve` (a webhook secret, the scripted model, GitHub pointed at a closed
port: nothing is handled here, only received) and measures its resident memory while N
concurrent clients (default 64) each post M MB (default 24) in three storms:
- wrong: `Content-Length` and a present but wrong `X-Hub-Signature-256`;
- none: `Content-Length` and no signature;
- chunked: `Transfer-Encoding: chunked` (no `Content-Length`) and a wrong signature.
During each storm one good signed delivery is sent and must get 202. Peak RSS is VmHWM of
the server process from /proc/<pid>/status, reset before each storm (`clear_refs`), and is
shown against the same process's idle RSS. The goal, peak RSS under 200 MB with 64 posts,
is checked as an allowance per post ((200 MB - idle) / 64), so that `--quick` (what CI
runs: 8 posts of 4 MB) fails too when a post costs memory in proportion to its body. Exits
1 when a storm misses it, an abusive post is not refused or the good delivery is not
accepted. `--root` runs the `teaparty serve` of another checkout (an older version, say).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import secrets
import signal
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.demo import free_port, private_key_pem
from bot.server.webhooks import signature

ROOT = Path(__file__).resolve().parent.parent
GOAL_MB = 200
GOAL_CLIENTS = 64
CHUNK = 256 * 1024
STORMS = ("wrong", "none", "chunked")


@dataclass
class Storm:
    """What one storm did to the server and what its clients saw."""

    name: str
    peak_kb: int = 0
    seconds: float = 0.0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    good: str = ""


def rss(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of `pid`, in kB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            fields[name] = int(value.split()[0])
    return fields


def reset_peak(pid: int) -> None:
    """Start VmHWM again from the current RSS (Linux >= 4.0, own processes)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")


@contextlib.asynccontextmanager
async def serving(root: Path, home: Path, secret: str) -> AsyncIterator[tuple[int, int, Path]]:
    """A `teaparty serve` from `root`; yields its pid, port and log."""
    port, closed = free_port(), free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env |= {
        "GITHUB_APP_ID": "1",
        "GITHUB_APP_PRIVATE_KEY": private_key_pem(),
        "GITHUB_WEBHOOK_SECRET": secret,
        "GITHUB_API_URL": f"http://127.0.0.1:{closed}",
        "TEAPARTY_HOME": str(home),
        "PYTHONPATH": str(root),
    }
    log = home.parent / "server.log"
    with log.open("ab") as out:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "serve", "--port", str(port),
            env=env, cwd=root, stdout=out, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
    try:
        for _ in range(400):
            if process.returncode is not None:
                raise SystemExit(f"teaparty serve exited:\n{log.read_text()}")
            with contextlib.suppress(OSError):
                if await status_of(port, head(port, "/healthz", method="GET"), b"") == "200":
                    break
            await asyncio.sleep(0.05)
        else:
            raise SystemExit(f"teaparty serve did not answer:\n{log.read_text()}")
        yield process.pid, port, log
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), 30)
        except TimeoutError:
            process.kill()
            await process.wait()


def head(port: int, path: str = "/webhook", *, method: str = "POST", **fields: str) -> bytes:
    """A request head; `fields` become headers (`x_hub_signature_256=` → X-Hub-Signature-256)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    lines += [f"{name.replace('_', '-')}: {value}" for name, value in fields.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def status_of(port: int, request_head: bytes, body: bytes, *, chunked: bool = False) -> str:
    """Send one request; its status, or how the connection failed."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request_head)
        for start in range(0, len(body), CHUNK):
            piece = body[start : start + CHUNK]
            writer.write(b"%x\r\n%b\r\n" % (len(piece), piece) if chunked else piece)
            await writer.drain()
        if chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()
        line = await reader.readline()
        return line.split()[1].decode() if line else "closed"
    except (ConnectionResetError, BrokenPipeError):
        return "reset"
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()


def abusive(port: int, kind: str, size: int) -> tuple[bytes, bool]:
    """The head of one abusive post of `size` bytes, and whether its body is chunked."""
    fields = {
        "Content_Type": "application/json",
        "X_GitHub_Event": "issues",
        "X_GitHub_Delivery": "abuse-" + secrets.token_hex(8),
    }
    if kind != "none":
        fields["X_Hub_Signature_256"] = "sha256=" + "0" * 64
    if kind == "chunked":
        fields["Transfer_Encoding"] = "chunked"
    else:
        fields["Content_Length"] = str(size)
    return head(port, **fields), kind == "chunked"


async def good(port: int, secret: str) -> str:
    """One signed ping: the status it got."""
    body = b'{"zen": "Keep it logically awesome.", "hook_id": 1}'
    request = head(
        port,
        Content_Type="application/json",
        Content_Length=str(len(body)),
        X_GitHub_Event="ping",
        X_GitHub_Delivery="good-" + secrets.token_hex(8),
        X_Hub_Signature_256=signature(secret, body),
    )
    return await status_of(port, request, body)


async def storm(pid: int, port: int, kind: str, options: argparse.Namespace) -> Storm:
    """`options.clients` concurrent posts of `options.mb` MB of `kind`, and one good delivery."""
    size = options.mb * 1024 * 1024
    body = b'{"pad": "' + b"x" * (size - 11) + b'"}'
    result = Storm(kind)
    reset_peak(pid)
    began = time.perf_counter()

    async def one() -> None:
        request, chunked = abusive(port, kind, size)
        result.outcomes[await status_of(port, request, body, chunked=chunked)] += 1

    async def good_after_a_while() -> None:
        await asyncio.sleep(0.2)
        result.good = await good(port, options.secret)

    async with asyncio.TaskGroup() as tasks:
        for _ in range(options.clients):
            tasks.create_task(one())
        tasks.create_task(good_after_a_while())
    result.seconds = time.perf_counter() - began
    result.peak_kb = rss(pid)["VmHWM"]
    return result


async def main(options: argparse.Namespace) -> int:
    options.secret = secrets.token_hex(20)
    with tempfile.TemporaryDirectory(prefix="teaparty-abuse-") as name:
        async with serving(options.root, Path(name) / "home", options.secret) as (pid, port, _):
            for _ in range(3):  # the first deliveries import and allocate what every one needs
                await good(port, options.secret)
            await asyncio.sleep(0.5)
            idle = rss(pid)["VmRSS"]
            storms = [await storm(pid, port, kind, options) for kind in STORMS]
    return report(idle, storms, options)


def report(idle_kb: int, storms: list[Storm], options: argparse.Namespace) -> int:
    print(f"teaparty serve, {options.clients} concurrent posts of {options.mb} MB per storm")
    print(f"idle RSS: {idle_kb / 1024:.0f} MB\n")
    print(f"{'storm':<8} {'peak RSS MB':>11} {'/ idle':>6} {'seconds':>7}  good  client outcomes")
    for s in storms:
        outcomes = ", ".join(f"{n} {what}" for what, n in sorted(s.outcomes.items()))
        print(
            f"{s.name:<8} {s.peak_kb / 1024:>11.0f} {s.peak_kb / idle_kb:>6.2f}"
            f" {s.seconds:>7.1f}  {s.good:<4}  {outcomes}"
        )
    allowance_kb = (GOAL_MB * 1024 - idle_kb) / GOAL_CLIENTS
    worst = max(storms, key=lambda s: s.peak_kb)
    per_post_kb = (worst.peak_kb - idle_kb) / options.clients
    within = per_post_kb < allowance_kb
    accepted = all(s.good == "202" for s in storms)
    refused = all(set(s.outcomes) <= {"401", "503", "reset", "closed"} for s in storms)
    print("\nverdicts:")
    print(
        f"  peak RSS under {GOAL_MB} MB at {GOAL_CLIENTS} posts: {'met' if within else 'NOT met'}"
        f" ({worst.name}: {per_post_kb / 1024:.2f} MB a post above idle;"
        f" allowed {allowance_kb / 1024:.2f})"
    )
    print(f"  the good delivery got 202 in every storm: {'yes' if accepted else 'NO'}")
    print(f"  every abusive post refused (401/503/closed): {'yes' if refused else 'NO'}")
    return 0 if within and accepted and refused else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="8 posts of 4 MB (for CI)")
    parser.add_argument("--clients", type=int, default=64, help="concurrent posts a storm")
    parser.add_argument("--mb", type=int, default=24, help="size of each post, MB")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout to serve from")
    options = parser.parse_args()
    if options.quick:
        options.clients, options.mb = 8, 4
    sys.exit(asyncio.run(main(options)))
