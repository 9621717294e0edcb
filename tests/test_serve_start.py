"""`teaparty serve` starting and stopping: every configuration problem at once (exit 2), the
port or the store taken (exit 3), SIGTERM (0) and Ctrl-C (130) without a traceback, and one
log format for the App's records and uvicorn's."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import uvicorn
from app_harness import Served, Server, serve_process, served
from fastapi import FastAPI

from bot.cli import main
from bot.demo import free_port, private_key_pem
from bot.serve import Stop

pytestmark = pytest.mark.timeout(120)

PEM = private_key_pem()
# A line of bot.serve.LOG_FORMAT: "2026-01-02 03:04:05,678 INFO uvicorn.error: Started ..."
LOG_LINE = re.compile(
    r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: \S.*"
)


def working_env(tmp_path: Path, **changes: str) -> dict[str, str]:
    """What `teaparty serve` needs, with `changes` (an empty value removes a variable)."""
    env = {
        "GITHUB_APP_ID": "4242",
        "GITHUB_APP_PRIVATE_KEY": PEM,
        "GITHUB_WEBHOOK_SECRET": "hook-secret",
        "GITHUB_API_URL": "http://127.0.0.1:9/",
        "TEAPARTY_HOME": str(tmp_path / "home"),
        "TEAPARTY_SANDBOX": "off",
    } | changes
    return {name: value for name, value in env.items() if value}


def test_every_problem_is_listed_in_one_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    truncated = PEM[:300]
    env = working_env(
        tmp_path,
        GITHUB_APP_ID="abc",
        GITHUB_APP_PRIVATE_KEY=truncated,
        GITHUB_WEBHOOK_SECRET="",
        GITHUB_API_URL="not-a-url",
    )
    assert main(["serve", "--port", "99999", "--model", "anthropic"], environ=env) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "teaparty serve: 6 problems:",
        "  GITHUB_APP_ID='abc': not an App id (a number: 'App ID' on the App's settings page)",
        "  GITHUB_APP_PRIVATE_KEY: not a PEM private key that parses (truncated or damaged?)",
        "  GITHUB_WEBHOOK_SECRET is not set (set TEAPARTY_INSECURE_NO_SIGNATURE=1 to accept "
        "unsigned deliveries, for local development only)",
        "  GITHUB_API_URL='not-a-url': not an http(s) URL with a host",
        "  --port 99999: must be a whole number from 1 to 65535",
        "  --model anthropic: ANTHROPIC_API_KEY is not set",
    ]
    assert truncated.splitlines()[1] not in err
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize("port", ["0", "65536", "99999", "-1", "http", "８０"])
def test_a_port_outside_1_to_65535_is_refused_before_anything_binds(
    port: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["serve", "--port", port], environ=working_env(tmp_path)) == 2
    assert capsys.readouterr().err == (
        f"teaparty serve: --port {port}: must be a whole number from 1 to 65535\n"
    )


def test_a_port_in_use_exits_3_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)], environ=working_env(tmp_path)) == 3
    assert capsys.readouterr().err == (
        f"teaparty serve: cannot listen on 127.0.0.1:{port}: in use by another process\n"
    )
    assert not (tmp_path / "home").exists()


def test_a_host_that_does_not_resolve_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["serve", "--host", "nowhere.invalid", "--port", str(free_port())]
    assert main(args, environ=working_env(tmp_path)) == 2
    assert capsys.readouterr().err.startswith("teaparty serve: --host nowhere.invalid: ")


def test_an_organisation_that_does_not_load_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = working_env(tmp_path, TEAPARTY_CONFIG=str(tmp_path / "no-org"))
    assert main(["serve", "--port", str(free_port())], environ=env) == 2
    err = capsys.readouterr().err
    assert err.startswith("teaparty serve: ")
    assert str(tmp_path / "no-org") in err
    assert err.count("\n") == 1
    # the loop that ran it is closed: Ctrl-C and SIGTERM are Python's own again
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL


def test_the_help_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for code in (
        "0 stopped by SIGTERM",
        "2 usage or configuration error",
        "3 environment (the port is in use, the store is locked by another process)",
        "130 interrupted (Ctrl-C)",
    ):
        assert code in help_text


def test_stop_signals() -> None:
    stop = Stop()
    assert stop.exit_code == 0
    stop.on_signal(signal.SIGINT)  # while starting: kept until there is a server
    server = uvicorn.Server(uvicorn.Config(FastAPI()))
    stop.serving(server)
    assert (server.should_exit, server.force_exit, stop.exit_code) == (True, False, 130)
    stop.on_signal(signal.SIGTERM)  # a second signal: no more waiting for connections
    assert (server.force_exit, stop.exit_code) == (True, 130)
    terminated = Stop()
    server = uvicorn.Server(uvicorn.Config(FastAPI()))
    terminated.serving(server)
    assert not server.should_exit
    terminated.on_signal(signal.SIGTERM)
    assert (server.should_exit, server.force_exit, terminated.exit_code) == (True, False, 0)


# -- a real `teaparty serve` against the GitHub stand-in ------------------------------------


@pytest.fixture
async def running(tmp_path: Path) -> AsyncIterator[Served]:
    async with served(tmp_path, pem=PEM) as running:
        yield running


async def stopped(server: Server, signum: int) -> int:
    server.process.send_signal(signum)
    return await asyncio.wait_for(server.process.wait(), 20)


async def teaparty_serve(env: dict[str, str], *, port: int) -> tuple[int, str]:
    """Another `teaparty serve` to its end: its exit code and everything it wrote."""
    process = await serve_process(env, port=port, out=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode is not None
    return process.returncode, out.decode()


async def test_one_log_format_and_sigterm_exits_0(running: Served) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", running.port)
    writer.write(b"NOT HTTP\r\n\r\n")  # uvicorn itself logs the bad request
    await writer.drain()
    assert (await asyncio.wait_for(reader.read(), 20)).startswith(b"HTTP/1.1 400 ")  # logged
    writer.close()
    await writer.wait_closed()
    assert await stopped(running.server, signal.SIGTERM) == 0
    lines = running.server.output().splitlines()
    assert [line for line in lines if not LOG_LINE.fullmatch(line)] == []
    assert any(" INFO uvicorn.error: Started server process" in line for line in lines)
    assert any(" WARNING uvicorn.error: Invalid HTTP request received." in line for line in lines)
    assert any(" INFO bot.serve: SIGTERM: stopping" in line for line in lines)
    assert lines[-1].endswith(" INFO bot.serve: stopped")


async def test_ctrl_c_exits_130_without_a_traceback(running: Served) -> None:
    assert await stopped(running.server, signal.SIGINT) == 130
    output = running.server.output()
    assert "Traceback" not in output
    assert output.splitlines()[-1].endswith(" INFO bot.serve: stopped")


async def test_a_second_server_on_the_same_store_or_port_exits_3(
    running: Served, tmp_path: Path
) -> None:
    env = running.server.env
    status, out = await teaparty_serve(env, port=free_port())
    home = Path(env["TEAPARTY_HOME"])
    assert status == 3
    assert out.splitlines()[-1] == (
        f"teaparty serve: {home / 'teaparty.db'} is in use by another teaparty process "
        f"(lock {home / 'teaparty.db.lock'})"
    )
    assert "Traceback" not in out
    status, out = await teaparty_serve(
        env | {"TEAPARTY_HOME": str(tmp_path / "other")}, port=running.port
    )
    assert (status, out) == (
        3,
        f"teaparty serve: cannot listen on 127.0.0.1:{running.port}: in use by another process\n",
    )


async def test_the_environment_is_checked_in_the_real_command(tmp_path: Path) -> None:
    truncated = PEM[:400]
    env = working_env(tmp_path, GITHUB_APP_PRIVATE_KEY=truncated, GITHUB_API_URL="ftp://x")
    status, out = await teaparty_serve(env, port=free_port())
    assert (status, out) == (
        2,
        "teaparty serve: 2 problems:\n"
        "  GITHUB_APP_PRIVATE_KEY: not a PEM private key that parses (truncated or damaged?)\n"
        "  GITHUB_API_URL='ftp://x': not an http(s) URL with a host\n",
    )
