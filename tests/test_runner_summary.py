"""A runner's step summary: each job's summary whole, and (where the project turns them on)
its transcripts folded, cut with a note to stay well under GitHub's 1 MiB per step; off by
default; secrets masked and agent text made safe; transcripts read from a real run's store."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from jobs_cli_support import CLI
from local_repo import ENV, make_repo
from test_budget_gate import billed, open_office, project, start

from bot.github.outbound import Outbound
from bot.runner.action import ActionRun, summary
from bot.runner.env import ActionEnv
from bot.runner.summary import (
    BUDGET,
    STEP_SUMMARY_LIMIT,
    TRANSCRIPTS_OFF,
    Conversation,
    jobs_summary,
    read_transcripts,
)
from orchestrator.api import JobStatus, Level, Message, Task, Usage, redactor

SECRET = "s3cr3t-" + "q7Lw2Zp9" * 3
AGENT = Outbound("octo", "widgets", 7, "https://github.com")
REDACT = redactor({"DEPLOY_TOKEN": SECRET})


def task(number: int) -> Task:
    review = ("full", "spec-only", "none")[number % 3]
    return Task(number, f"Task {number}", "spec", None, review, "done", "ok", None, (), "lead")  # type: ignore[arg-type]


def big_job(job_id: int = 1) -> tuple[JobStatus, tuple[Conversation, ...]]:
    """A job of 50 tasks, each worked on by three conversations of 20 long messages."""
    status = JobStatus(
        job_id, "Fifty tasks", "done", "finished", tuple(task(n) for n in range(1, 51)),
        Usage(input_tokens=10_000), 1.5, "teaparty/job-7-fifty",
    )  # fmt: skip
    conversations = []
    for n in range(150):
        conversation_id = f"agent:lead:worker:{n}"
        level = Level(conversation_id, None, 1, "worker", n // 3 + 1, False, 20, Usage(), 0.0, n)
        text = f"@alice see </details> and {SECRET} " + "lorem ipsum " * 500
        said = tuple(
            Message(conversation_id, seq, "worker", "assistant", {"text": text})
            for seq in range(20)
        )
        conversations.append(Conversation(level, said))
    return status, tuple(conversations)


def test_a_fifty_task_jobs_summary_stays_under_the_limit_folded_and_cut() -> None:
    status, conversations = big_job()
    text = "\n".join(jobs_summary([status], {1: conversations}, agent=AGENT, redact=REDACT))
    size = len(text.encode())
    assert size <= BUDGET < STEP_SUMMARY_LIMIT
    assert size > BUDGET * 0.9, "the transcripts use the room there is"
    assert all(f"#{n} Task {n} (done; " in text for n in range(1, 51)), "the summary is whole"
    assert "<details><summary>Transcripts (150 conversations)</summary>" in text
    assert "**Transcripts cut here:**" in text
    assert "messages are left out" in text
    assert text.count("<details>") == text.count("</details>"), "agent text closes no fold"
    assert SECRET not in text
    assert "@alice" not in text.replace("`@alice`", "")


def test_by_default_a_run_shows_no_transcript() -> None:
    status, _ = big_job()
    text = "\n".join(jobs_summary([status], {}, agent=AGENT, redact=REDACT))
    assert TRANSCRIPTS_OFF in text
    assert "<details>" not in text
    assert "#50 Task 50" in text
    assert len(text.encode()) < 20_000


def test_a_small_job_shows_every_message() -> None:
    status, conversations = big_job()
    small = tuple(replace(c, messages=c.messages[:1]) for c in conversations[:2])
    text = "\n".join(jobs_summary([status], {1: small}, agent=AGENT, redact=REDACT))
    assert "cut here" not in text
    assert text.count("**#0 worker · assistant**") == 2


def test_a_secret_in_a_tool_calls_arguments_is_masked_before_it_is_encoded() -> None:
    """JSON writes a quote in a secret as \\": masked after encoding, it would show."""
    quoted = 'pa"ss\\word-' + "Zq81" * 4
    redact = redactor({"DEPLOY_TOKEN": SECRET, "DB_PASSWORD": quoted})
    status, _ = big_job()
    call = {"id": "c1", "name": "run", "args": {"command": f"deploy --token {quoted}"}}
    said = Message("agent:lead:worker:0", 0, "worker", "assistant", {"tool_calls": [call]})
    level = Level("agent:lead:worker:0", None, 1, "worker", 1, False, 20, Usage(), 0.0, 0)
    text = "\n".join(
        jobs_summary([status], {1: (Conversation(level, (said,)),)}, agent=AGENT, redact=redact)
    )
    assert "→ run" in text
    assert "Zq81Zq81" not in text
    assert "deploy --token" in text


async def test_transcripts_are_read_from_a_real_runs_store(tmp_path: Path) -> None:
    repo, home = make_repo(tmp_path / "widgets"), tmp_path / "home"
    run = await asyncio.create_subprocess_exec(
        *CLI, "run", "--title", "Add docs", "--yes", "--home", str(home), "--model", "scripted",
        cwd=repo, env=ENV, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(run.communicate(), timeout=90)
    assert run.returncode == 0, err.decode()
    (conversations,) = (await read_transcripts(home, [1])).values()
    assert conversations[0].level.depth == 0
    assert all(len(c.messages) == c.level.messages for c in conversations)
    assert sum(len(c.messages) for c in conversations) > 3


def test_the_runs_summary_says_the_event_then_each_job(tmp_path: Path) -> None:
    environ = {
        "GITHUB_EVENT_NAME": "issues",
        "GITHUB_EVENT_PATH": str(tmp_path / "event.json"),
        "GITHUB_REPOSITORY": "octo/widgets",
        "GITHUB_RUN_ID": "9",
        "GITHUB_TOKEN": "ghs_" + "t" * 36,
    }
    env = ActionEnv.from_env(environ, home=tmp_path)
    status, conversations = big_job()
    said = replace(
        conversations[0].messages[0], content={"text": f"the token {environ['GITHUB_TOKEN']}"}
    )
    shown = (replace(conversations[0], messages=(said,)),)
    text = summary(ActionRun("a job started", (status,), transcripts={1: shown}), env)
    assert text.startswith("## TeaParty\n\nEvent `issues`: a job started\n\n### Job 1: Fifty tasks")
    assert environ["GITHUB_TOKEN"] not in text
    assert "the token [GITHUB_TOKEN]" in text


async def test_the_project_says_whether_its_runs_show_transcripts(tmp_path: Path) -> None:
    for extra, shown in (("", False), ("runner: {summary_transcripts: true}\n", True)):
        text = project("max_usd: null") + extra
        office = await open_office(tmp_path / f"home-{shown}", text, billed())
        try:
            job_id = await start(office, make_repo(tmp_path / f"widgets-{shown}"), text)
            assert (await office.runner_settings(job_id)).summary_transcripts is shown
        finally:
            await office.close()
