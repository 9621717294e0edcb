"""`teaparty action` as a workflow run gives it: each run a separate process with only its
event file and a runner's environment, against the local GitHub stand-in and its bare
remote, with GITHUB_TOKEN (an installation token of the stand-in)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from app_harness import APP_ID, OWNER, REPO, make_hub

from bot.demo import free_port, private_key_pem
from bot.fakehub.hub import FakeGitHub

RUNS = count(9_000_001)
TOKEN_PERMISSIONS = {
    "issues": "write",
    "contents": "write",
    "pull_requests": "write",
    "actions": "write",
    "checks": "write",
    "metadata": "read",
}


@dataclass
class Run:
    code: int
    output: str
    summary: str


async def act(
    hub: FakeGitHub, api_url: str, tmp: Path, event: str, body: bytes, **more: str
) -> Run:
    """One workflow run of `event` whose payload is `body` (`more`: environment to add)."""
    run_id = next(RUNS)
    folder = tmp / f"run-{run_id}"
    folder.mkdir()
    (folder / "event.json").write_bytes(body)
    token = hub.state.issue_token(  # GITHUB_TOKEN's permissions as the reusable workflow asks
        1,
        permissions=TOKEN_PERMISSIONS,
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GITHUB_"))}
    env |= {
        "GITHUB_EVENT_NAME": event,
        "GITHUB_EVENT_PATH": str(folder / "event.json"),
        "GITHUB_REPOSITORY": f"{OWNER}/{REPO}",
        "GITHUB_RUN_ID": str(run_id),
        "GITHUB_API_URL": api_url,
        "GITHUB_SERVER_URL": hub.server_url,
        "GITHUB_TOKEN": token.token,
        "GITHUB_STEP_SUMMARY": str(folder / "summary.md"),
        "TEAPARTY_BOT_LOGIN": hub.state.bot.login,
        "TEAPARTY_BOT_APP_ID": str(APP_ID),
        "TEAPARTY_HOME": str(folder / "home"),  # a fresh machine: nothing carried over
        "RUNNER_TEMP": str(folder / "temp"),
        "GITHUB_WORKFLOW_REF": f"{OWNER}/{REPO}/.github/workflows/teaparty.yml@refs/heads/main",
    } | more
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "action",
        env=env,
        cwd=folder,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    summary = folder / "summary.md"
    return Run(
        process.returncode or 0, out.decode(), summary.read_text() if summary.exists() else ""
    )


NO_PLAN = "humans: {decider: alice}\ngates: {plan: never}\n"  # a project file: no plan gate


def runner_hub(tmp: Path, pem: str | None = None) -> FakeGitHub:
    """The stand-in with octo/widgets, alice its admin, the App's key `pem` (fresh if not
    given); no server receives its webhooks (a runner reads each event from its file)."""
    hub = make_hub(tmp / "hub", port=free_port(), pem=pem or private_key_pem())
    hub.add_user("alice", "admin")
    return hub


async def labelled(hub: FakeGitHub, title: str, body: str) -> int:
    """An issue alice opens and labels `teaparty`; its number."""
    number = hub.open_issue(OWNER, REPO, title=title, body=body, author="alice")
    await hub.label_issue(OWNER, REPO, number, "teaparty", sender="alice")
    return number


CHANGELOG = "docs/requests/add-a-changelog.md"  # the file the demo job adds


async def delivered(
    hub: FakeGitHub, api_url: str, tmp: Path, project: str = NO_PLAN
) -> tuple[int, int]:
    """A labelled issue whose job, with no plan question, runs to its pull request in one
    run; the issue's number and the pull request's."""
    await hub.push_to_branch(OWNER, REPO, "main", "alice", {".teaparty/project.yaml": project})
    number = await labelled(hub, "Add a changelog", "Please.")
    run = await act(hub, api_url, tmp, "issues", last(hub, "issues"))
    assert run.code == 0, run.output
    (pull,) = hub.pulls(OWNER, REPO)
    return number, pull.number


def state_saves(hub: FakeGitHub) -> list[str]:
    """The subjects of the state ref's commits on the stand-in's remote, newest first."""
    remote = hub.root / OWNER / f"{REPO}.git"
    return subprocess.run(
        ["git", "-C", str(remote), "log", "--format=%s", "refs/teaparty/state"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.splitlines()


def preserved_refs(hub: FakeGitHub) -> str:
    """The jobs' preserved work on the stand-in's remote (`refs/teaparty/work/*`)."""
    remote = hub.root / OWNER / f"{REPO}.git"
    return subprocess.run(
        ["git", "-C", str(remote), "for-each-ref", "refs/teaparty/work/"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def last(hub: FakeGitHub, event: str) -> bytes:
    """The payload of the newest delivery of `event` the stand-in made."""
    return next(d.body for d in reversed(hub.deliveries) if d.event == event)
