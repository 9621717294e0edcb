"""`teaparty demo` runs the whole App loop offline and ends with the pull request."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from bot.demo import free_port, run_demo

pytestmark = pytest.mark.timeout(120)


async def test_the_demo_ends_with_one_pull_request_that_closes_the_issue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_demo(tmp_path, {"PATH": "/usr/bin:/bin"}, limit_s=90) == 0
    out = capsys.readouterr().out
    assert "answered 202" in out
    assert "👀 the App reacted" in out
    assert re.search(r"\(the demo decider\) replied: /approve [0-9a-f]{7}\n", out)
    assert "pull request #2: Add a CHANGELOG (#1)" in out
    assert "Closes #1" in out
    assert "docs/requests/add-a-changelog.md" in out
    assert re.search(
        r"check run `TeaParty` on [0-9a-f]{7}: neutral — Job 1: done, nothing checked", out
    )
    assert "schema violations: 0" in out


async def test_the_demo_shows_the_jobs_progress_while_it_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With each model call taking a real 0.2 s, the view sees the phases and the team."""
    import asyncio
    from collections.abc import Callable

    import bot.demo as demo
    from bot.progress import Lines
    from orchestrator.api import AgentDef, AssistantTurn, Model, ModelRequest, Progress

    real = demo.models

    def slowed(*args: object) -> Callable[[AgentDef], Model]:
        made = real(*args)  # type: ignore[arg-type]

        class Slow:
            def __init__(self, model: Model) -> None:
                self.model = model

            async def complete(self, request: ModelRequest) -> AssistantTurn:
                await asyncio.sleep(0.2)
                return await self.model.complete(request)

        return lambda agent: Slow(made(agent))

    class Seen(Lines):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[Progress] = []

        def update(self, progress: Progress) -> None:
            self.seen.append(progress)
            super().update(progress)

    monkeypatch.setattr(demo, "models", slowed)
    view = Seen()
    assert await run_demo(tmp_path, {"PATH": "/usr/bin:/bin"}, limit_s=90, view=view) == 0
    assert {p.status.state for p in view.seen} >= {"working"}
    members = {m.agent for p in view.seen for t in p.teams if t.task == 1 for m in t.members}
    assert "octo-demo/coding/implementer" in members


def test_the_demos_port_is_one_no_socket_bound_to_port_0_can_take_meanwhile() -> None:
    """The webhook URL names the port before the server binds it; the stand-in's own server
    binds port 0 in between, and the kernel could give it that very port."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    ports = {free_port() for _ in range(20)}
    assert all(20_000 <= port < low for port in ports)
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", port))  # nobody listens there
