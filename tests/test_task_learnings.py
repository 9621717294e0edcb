"""What a job learned is kept once a person merges it, and found again for later tasks.

Local jobs on a real repository, played by the scripted organisation, with a lead whose
final reply lists learnings. The engine commits them on the job branch as a file of the
job's own (no protected-path question: it is exactly what the engine wrote); once a person
merges that branch into the branch later jobs start from, a later job's worker on a related
task reads the learning in its brief, with its id and source. A learning on a branch
nobody merged is never found. A forgotten learning is never found again, and the next
job's branch removes it from its file.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

import local_job
import pytest
from local_repo import git, make_repo

from bot.cli import main
from orchestrator.config import shipped_org_dir
from orchestrator.core.messages import AssistantTurn
from orchestrator.core.model import ModelRequest
from orchestrator.jobs.admin import managing
from orchestrator.jobs.learned import file_of
from orchestrator.jobs.local_repo import local_repository
from orchestrator.jobs.offline import DemoModel
from orchestrator.memory.entries import LEARNINGS_DIR, learning_id
from orchestrator.sandbox.confine import Sandbox

NOWHERE = Sandbox("unavailable", "not needed: the scripted organisation runs no shell")
MAKE_CHECK = "Run the tests with `make check`: plain pytest misses the fixtures."
SHIP = "Deploy previews with `make ship-preview` after the build."


class Learns(DemoModel):
    """The scripted organisation, whose lead ends its final reply with learnings."""

    def __init__(self, *learnings: str, title: str | None = None, path: str | None = None) -> None:
        super().__init__(title=title, body=title, path=path)
        self.learnings = learnings

    def _lead(self, request: ModelRequest) -> AssistantTurn:
        turn = super()._lead(request)
        if turn.tool_calls or not turn.text.startswith("Done.") or not self.learnings:
            return turn
        listed = "".join(f"- {text}\n" for text in self.learnings)
        return AssistantTurn(text=f"{turn.text}\n\n**Learnings:**\n{listed}")


def calc_repo(path: Path) -> Path:
    repo = make_repo(path)
    (repo / ".teaparty").mkdir()
    (repo / ".teaparty" / "project.yaml").write_text("humans: {decider: dev}\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "project")
    return repo


SAID: dict[int, list[str]] = {}  # what each job's run printed, by job id


async def run_job(repo: Path, home: Path, *, title: str, model: DemoModel) -> tuple[int, str]:
    """One local job of `repo` from its HEAD, driven to its end (tests/local_job.py); its id
    and branch (what it printed, as `teaparty run` does, in SAID)."""
    ran = await local_job.run_job(
        repo, home, NOWHERE, title=title, model=model, scripted=True, repo_id=local_repository(repo)
    )
    SAID[ran.job_id] = ran.lines
    return ran.job_id, ran.branch


def worker_brief(home: Path, job_id: int) -> str:
    """The first message the job's worker (the implementer) got."""
    with sqlite3.connect(home / "teaparty.db") as db:
        (content,) = db.execute(
            "SELECT m.content FROM messages m JOIN conversations c USING (conversation_id)"
            " WHERE c.job_id = ? AND c.agent LIKE '%/implementer' AND m.role = 'user'"
            " ORDER BY m.message_id LIMIT 1",
            (job_id,),
        ).fetchone()
    given = json.loads(content)  # what the mini-team shares (the task), then the worker's part
    return f"{given.get('shared', '')}\n\n{given['text']}"


def gate_kinds(home: Path, job_id: int) -> list[str]:
    with sqlite3.connect(home / "teaparty.db") as db:
        rows = db.execute("SELECT kind FROM gates WHERE job_id = ?", (job_id,)).fetchall()
    return [kind for (kind,) in rows]


def merge(repo: Path, branch: str) -> None:
    """A person merges the job's branch into main, the branch later jobs start from."""
    git(repo, "merge", "--quiet", "--no-ff", "-m", f"Merge {branch}", branch)


async def test_a_merged_learning_reaches_a_related_task_and_an_unmerged_one_never_does(
    tmp_path: Path,
) -> None:
    repo, home = calc_repo(tmp_path / "calc"), tmp_path / "home"

    first, kept = await run_job(repo, home, title="Add the mul function", model=Learns(MAKE_CHECK))
    path = file_of(f"local:{repo}:Add the mul function", kept)
    written = git(repo, "show", f"{kept}:{path}")
    make_check = learning_id(MAKE_CHECK)
    source = f"local job {first}, branch {kept}"
    assert f"(`{make_check}`, {source})" in written
    assert "`make check`" in written
    assert "protected-path" not in gate_kinds(home, first), "the engine's own file asks nothing"
    said = "\n".join(SAID[first])
    assert f"job {first} learned (in {kept}'s .teaparty/learnings/" in said
    assert f"  {make_check}  {MAKE_CHECK}" in said
    merge(repo, kept)

    second, dropped = await run_job(repo, home, title="Add the sub function", model=Learns(SHIP))
    assert path.startswith(f"{LEARNINGS_DIR}/")
    # Job 2's branch is never merged: its learning stays on that branch alone.

    third, _ = await run_job(
        repo, home, title="Check the tests and ship a preview of div", model=Learns()
    )
    brief = worker_brief(home, third)
    assert "Past learnings of this repository" in brief
    assert f"- {MAKE_CHECK} (id {make_check}, from {source})" in brief
    assert "make ship-preview" not in brief, "a learning nobody merged is never retrieved"
    assert "make ship-preview" in git(repo, "log", "-p", dropped, "--", LEARNINGS_DIR)
    assert second != third

    async with managing(home, org_dir=shipped_org_dir()) as office:  # as `/forget` does
        assert await office.forget_learning(third, make_check, by="carol")
        assert not await office.forget_learning(third, make_check, by="carol")
        space = await office.workspace.job(third)
        assert space is not None
        assert await office.recall_learnings(space, "Check the tests") == ()


async def cli_main(argv: list[str], *, environ: dict[str, str]) -> int:
    """`teaparty ...` as a person runs it (its own event loop: in a thread here)."""
    return await asyncio.to_thread(main, argv, environ=environ)


async def test_a_forgotten_learning_is_never_given_again_and_the_next_branch_removes_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    repo, home = calc_repo(tmp_path / "calc"), tmp_path / "home"
    _, kept = await run_job(repo, home, title="Add the mul function", model=Learns(MAKE_CHECK))
    merge(repo, kept)
    make_check = learning_id(MAKE_CHECK)
    cli = ["--repo", str(repo), "--home", str(home)]

    assert await cli_main(["learnings", "list", *cli], environ={}) == 0
    listed = capsys.readouterr().out
    assert f"{make_check}  {MAKE_CHECK}\n" in listed
    assert "forgotten" not in listed
    assert await cli_main(["learnings", "forget", make_check, *cli], environ={}) == 0
    assert f"{make_check} forgotten" in capsys.readouterr().out
    assert await cli_main(["learnings", "list", "--json", *cli], environ={}) == 0
    [item] = json.loads(capsys.readouterr().out)
    assert (item["id"], item["forgotten"]) == (make_check, True)
    assert await cli_main(["learnings", "forget", "not-an-id", *cli], environ={}) == 2

    later, branch = await run_job(
        repo, home, title="Check the tests of the div function", model=Learns()
    )
    assert MAKE_CHECK not in worker_brief(home, later), "forgotten: never given again"
    path = file_of(f"local:{repo}:Add the mul function", kept)
    assert path in git(repo, "ls-tree", "-r", "--name-only", "main")
    assert path not in git(repo, "ls-tree", "-r", "--name-only", branch), "removed on its branch"
    assert "protected-path" not in gate_kinds(home, later)
    merge(repo, branch)
    assert await cli_main(["learnings", "list", *cli], environ={}) == 0
    assert make_check not in capsys.readouterr().out, "merged: the repository forgot it too"


async def test_a_learnings_file_an_agent_writes_is_put_to_the_decider(tmp_path: Path) -> None:
    repo, home = calc_repo(tmp_path / "calc"), tmp_path / "home"
    planted = f"{LEARNINGS_DIR}/planted.md"
    model = Learns(MAKE_CHECK, title="Plant a learning", path=planted)

    job_id, branch = await run_job(repo, home, title="Plant a learning", model=model)

    assert "protected-path" in gate_kinds(home, job_id), "only the engine's own file goes unasked"
    assert planted in git(repo, "ls-tree", "-r", "--name-only", branch)
