"""On a host that cannot confine agents' shells, a labelled issue gets one comment saying why."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from app_harness import OWNER, REPO, app_settings, in_process, make_hub, until

from bot.demo import free_port, private_key_pem
from bot.github.tracking import MARKER_PREFIX
from bot.server.runtime import Runtime
from orchestrator.jobs.model_choice import models
from orchestrator.sandbox.confine import Sandbox


def pending_is(runtime: Runtime, count: int) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        (pending,) = await runtime.office.engine.store.read(
            lambda tx: tx.execute(
                "SELECT count(*) FROM deliveries WHERE state = 'pending'"
            ).fetchone()
        )
        return bool(pending == count)

    return check


NOWHERE = Sandbox("unavailable", "bwrap: no user namespaces here; landlock: Linux 5.10")


async def test_a_job_that_needs_a_sandbox_is_refused_once_with_the_cause(tmp_path: Path) -> None:
    pem, port = private_key_pem(), free_port()
    hub = make_hub(tmp_path / "hub", port=port, pem=pem)
    hub.add_user("alice", "admin")
    async with hub.serve() as api_url:
        settings = app_settings(hub, api_url, tmp_path / "home", pem)
        # A real model (never called): its agents have shells, so they need a sandbox.
        scripted = models("scripted", {})
        async with in_process(
            settings, scripted, port=port, sandbox=NOWHERE, scripted=False
        ) as runtime:
            number = hub.open_issue(OWNER, REPO, title="Do it", body="please", author="alice")
            for _ in range(2):
                await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
            await until(pending_is(runtime, 0), what="both deliveries to be handled")
    comments = hub.comments(OWNER, REPO, number)
    assert len(comments) == 1, [c.body for c in comments]
    body = comments[0].body
    assert body.startswith(MARKER_PREFIX + "no-sandbox -->")
    assert "no user namespaces here; landlock: Linux 5.10" in body
    assert "teaparty doctor" in body
    assert not [c for c in comments if MARKER_PREFIX + "job:" in c.body], "no job started"
