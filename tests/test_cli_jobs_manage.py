"""`teaparty jobs answer/cancel/clean`, and following a log, as real processes: beside a
`teaparty run` that holds the store (on a real terminal), and on their own."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
from jobs_cli_support import CLI, USER, here, jobs_json, teaparty
from jobs_harness import open_office, start
from local_repo import ENV, git, make_repo
from terminal import Terminal

from orchestrator.api import run_scope

pytestmark = pytest.mark.timeout(180)
SOURCE = Path(__file__).resolve().parent.parent  # run from here, `-m bot.cli` is this checkout's


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


def park(title: str, *, home: Path, repo: Path) -> None:
    parked = teaparty("run", "--title", title, "--no-input", home=home, cwd=repo)
    assert parked.returncode == 4, parked.stderr


def test_answering_a_parked_local_job_lets_it_go_on(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    park("Add docs", home=home, repo=repo)
    answered = here("answer", "1", "Y", home=home)
    assert answered.returncode == 0, answered.stderr
    assert answered.stdout.splitlines() == [
        f"gate 1 of job 1 answered as {USER}: yes",
        f"  the job goes on with: teaparty run --repo {repo} --resume 1 --home {home}",
    ]
    [gate] = jobs_json("show", "1", home=home)["gates"]
    assert (gate["state"], gate["answer"], gate["answered_by"]) == ("answered", "yes", USER)
    again = teaparty("jobs", "answer", "1", "no", home=home)
    assert (again.returncode, again.stderr) == (
        1,
        "teaparty jobs answer: job 1 has no open question\n",
    )
    resumed = teaparty("run", "--resume", "1", "--no-input", home=home, cwd=repo)
    assert resumed.returncode == 0, resumed.stderr
    assert "gate" not in resumed.stdout, "the question was answered already"
    assert git(repo, "log", "--format=%s", "teaparty/job-1-add-docs", "--not", "main")


def test_a_cancel_beside_a_run_is_carried_out_by_that_run(repo: Path, tmp_path: Path) -> None:
    """The run waits at its question on a terminal, holding the store; another terminal
    reads the store, may not answer or clean, and cancels: the run stops, saying so."""
    home = tmp_path / "home"
    argv = [*CLI, "run", "--title", "Add docs", "--home", str(home), "--model", "scripted"]
    with Terminal(argv, repo, ENV) as term:
        term.expect("your answer [yes/no]: ")
        [listed] = jobs_json("list", home=home)
        assert (listed["id"], listed["state"], listed["open_gates"]) == (1, "waiting", 1)
        assert teaparty("jobs", "log", "1", home=home).returncode == 0
        answered = teaparty("jobs", "answer", "1", "yes", home=home)
        assert answered.returncode == 3
        assert "in use by another teaparty process" in answered.stderr
        cleaned = here("clean", "--yes", home=home)
        assert cleaned.returncode == 3

        cancelled = teaparty("jobs", "cancel", "1", home=home)
        assert cancelled.returncode == 0, cancelled.stderr
        assert cancelled.stdout == (
            "job 1 cancelled: 1 open gate closed, 2 conversations stopped, 1 task cancelled "
            "(by the teaparty process holding the store)\n"
        )
        assert term.wait(limit=10) == 1
    assert f"job 1 was cancelled (by {USER} (teaparty jobs cancel)); it cannot be resumed" in (
        term.output
    )
    assert "Traceback" not in term.output
    shown = jobs_json("show", "1", home=home)
    assert (shown["state"], shown["gates"][0]["state"]) == ("cancelled", "closed")
    assert [c["state"] for c in shown["commands"]] == ["done"]
    resumed = teaparty("run", "--resume", "1", "--yes", home=home, cwd=repo)
    assert (resumed.returncode, resumed.stderr.strip()) == (
        2,
        "teaparty run: job 1 was cancelled; start a new one instead",
    )


def test_a_cancel_nobody_carries_out_yet_is_said_to_wait(repo: Path, tmp_path: Path) -> None:
    """A store held by a process that does not look for commands (the test itself)."""
    home = tmp_path / "home"
    park("Add docs", home=home, repo=repo)
    lock = os.open(home / "teaparty.db.lock", os.O_RDWR)
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        result = subprocess.run(
            [*CLI, "jobs", "cancel", "1", "--wait", "0", "--home", str(home), "--json"],
            capture_output=True, text=True, env=ENV, timeout=60,
        )  # fmt: skip
    finally:
        os.close(lock)
    assert result.returncode == 0, result.stderr
    row = json.loads(result.stdout)
    assert (row["state"], row["carried_out_here"], row["outcome"]) == ("pending", False, None)
    listed = teaparty("run", "--title", "Next", "--no-input", home=home, cwd=repo)
    assert listed.returncode == 4, "the next process to hold the store carries it out"
    assert jobs_json("show", "1", home=home)["state"] == "cancelled"


def test_clean_removes_what_ended_jobs_leave_after_asking(tmp_path: Path) -> None:
    """widgets: done, cancelled and parked jobs; gadgets: one done job (its mirror unused)."""
    widgets, gadgets = make_repo(tmp_path / "widgets"), make_repo(tmp_path / "gadgets")
    home = tmp_path / "home"
    assert teaparty("run", "--title", "Add docs", "--yes", home=home, cwd=widgets).returncode == 0
    park("Drop it", home=home, repo=widgets)
    assert here("cancel", "2", home=home).returncode == 0
    park("Park it", home=home, repo=widgets)
    assert teaparty("run", "--title", "Fix typo", "--yes", home=home, cwd=gadgets).returncode == 0
    shown = {n: jobs_json("show", str(n), home=home) for n in (1, 2, 3, 4)}
    mirrors = {p.parent.name: p for p in home.glob("repos/local/*/mirror.git")}
    assert len(mirrors) == 2
    folder = {n: Path(job["worktree"]).parent for n, job in shown.items()}
    planted = Path(shown[3]["worktree"]) / "vendor" / "mirror.git"  # an agent's file, say
    planted.mkdir(parents=True)
    (planted / "HEAD").write_text("ref: refs/heads/main\n")

    refused = subprocess.run(
        [*CLI, "jobs", "clean", "--home", str(home)],
        capture_output=True, text=True, env=ENV, stdin=subprocess.DEVNULL, timeout=60,
    )  # fmt: skip
    assert (refused.returncode, refused.stderr) == (
        2,
        "teaparty jobs clean: nothing here can confirm (no terminal): add --yes to clean anyway\n",
    )
    with Terminal([*CLI, "jobs", "clean", "--home", str(home)], tmp_path, ENV) as term:
        term.expect("remove them? [y/N] ")
        term.send("n\n")
        assert term.wait() == 1
    assert "nothing removed" in term.output
    assert f"branch teaparty/job-2-drop-it in {folder[2] / 'repo.git'} (job 2)" in term.output
    assert folder[2].exists()

    cleaned = here("clean", "--yes", home=home)
    assert cleaned.returncode == 0, cleaned.stderr
    gadgets_mirror = str(folder[4].parent.parent / "mirror.git")
    assert cleaned.stdout.splitlines() == [
        f"removed worktree {shown[2]['worktree']} (job 2)",
        f"removed branch teaparty/job-2-drop-it in {folder[2] / 'repo.git'} (job 2)",
        f"removed job repository {folder[2]} (job 2)",
        f"removed job repository {folder[4]} (job 4)",
        f"removed mirror {gadgets_mirror}",
    ]
    assert not folder[2].exists()
    assert not folder[4].parent.parent.exists(), "gadgets' mirror and its jobs are gone"
    assert folder[1].exists(), "a done job's branches stay while its mirror is in use"
    assert (planted / "HEAD").is_file(), "the parked job is untouched, its files too"
    assert git(widgets, "branch", "--list", "teaparty/*").split() == ["teaparty/job-1-add-docs"]
    assert jobs_json("clean", "--yes", home=home, in_process=True) == {"removed": []}
    assert jobs_json("show", "2", home=home)["worktree_present"] is False
    resumed = teaparty("run", "--resume", "3", "--yes", home=home, cwd=widgets)
    assert resumed.returncode == 0, "the live job's mirror was kept: " + resumed.stderr


def test_following_a_log_ends_with_the_job_or_at_ctrl_c(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    park("Add docs", home=home, repo=repo)
    argv = [*CLI, "jobs", "log", "1", "--follow", "--home", str(home)]
    with Terminal(argv, tmp_path, ENV) as term:
        term.expect("-> dispatch")
        term.send("\x03")
        assert term.wait() == 130  # the job is parked: following it would go on for ever
    assert "Traceback" not in term.output
    follow = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV
    )
    try:
        assert follow.stdout is not None
        while "-> dispatch" not in follow.stdout.readline():
            pass
        assert teaparty("jobs", "cancel", "1", home=home).returncode == 0
        out, err = follow.communicate(timeout=10)
    finally:
        if follow.poll() is None:
            follow.send_signal(signal.SIGKILL)
    assert follow.returncode == 0, err
    assert out.endswith("job 1 cancelled: cancelled\n")


def test_cancelling_a_github_job_without_the_app_says_its_issue_was_not_told(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"

    async def github_job() -> None:
        office = await open_office(home)
        try:
            await start(office, repo, "Fix typo", key="github:octo/widgets#7")
        finally:
            await office.close()

    asyncio.run(github_job())
    cancelled = here("cancel", "1", home=home)
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.splitlines() == [
        "job 1 cancelled: 0 open gates closed, 1 conversation stopped, 0 tasks cancelled",
        "  note: no teaparty serve holds this store, so the issue's tracking comment was not "
        "updated",
    ]


def test_jobs_nothing_runs_say_what_carries_them_on(repo: Path, tmp_path: Path) -> None:
    """A GitHub job goes on when teaparty serve runs; a local one was interrupted. While a
    process holds the store, both are what they are doing."""
    home = tmp_path / "home"

    async def two_jobs() -> None:
        office = await open_office(home)
        try:
            await start(office, repo, "Fix typo", key="github:octo/widgets#7")
            await start(office, repo, "Add docs")
        finally:
            await office.close()

    asyncio.run(two_jobs())
    listed = teaparty("jobs", "list", home=home)
    assert listed.returncode == 0, listed.stderr
    _, local, github, line = listed.stdout.splitlines()
    assert local.split()[:3] == ["2", str(repo), "interrupted"]
    assert github.split()[:2] == ["1", "octo/widgets#7"]
    assert "  planning (goes on when teaparty serve runs)  " in github
    assert line == (
        f"job 2 is interrupted: nothing runs it; resume it with: teaparty run --repo {repo} "
        f"--resume 2 --home {home}"
    )
    shown = teaparty("jobs", "show", "1", home=home).stdout
    assert "  state       planning (goes on when teaparty serve runs): planning the work\n" in (
        shown
    )
    assert [(j["state"], j["running"]) for j in jobs_json("list", home=home)] == [
        ("interrupted", False),
        ("planning", False),
    ]
    for state, ids in (("interrupted", [2]), ("planning", [1]), ("active", [2, 1])):
        assert [j["id"] for j in jobs_json("list", "--state", state, home=home)] == ids

    def states() -> list[tuple[str, bool]]:
        return [(j["state"], j["running"]) for j in jobs_json("list", home=home)]

    async def held() -> list[list[tuple[str, bool]]]:
        office = await open_office(home)  # as teaparty serve would (it says nothing)
        try:
            every = states()
            office.engine.store.claim(run_scope(2))  # as a teaparty run of job 2 says
            return [every, states()]
        finally:
            await office.close()

    assert asyncio.run(held()) == [
        [("planning", True), ("planning", True)],
        [("planning", True), ("planning", False)],
    ]
    held_list = teaparty("jobs", "list", home=home).stdout
    assert "interrupted" in held_list, "let go again"


def test_a_store_in_use_names_the_next_step(repo: Path, tmp_path: Path) -> None:
    """A run waits at its question on a terminal: answering it from elsewhere is sent to that
    terminal, and a second run is told to wait or take a state directory of its own, which
    then works beside the first."""
    home = tmp_path / "home"
    park("Park it", home=home, repo=repo)  # job 1, at gate 1
    in_use = (
        f"teaparty jobs answer: {home / 'teaparty.db'} is in use by another teaparty process "
        f"(lock {home / 'teaparty.db.lock'}): "
    )
    argv = [*CLI, "run", "--repo", str(repo), "--title", "Add docs", "--home", str(home)]
    with Terminal([*argv, "--model", "scripted"], SOURCE, ENV) as term:
        term.expect("your answer [yes/no]: ")
        answered = teaparty("jobs", "answer", "2", "yes", home=home)
        assert (answered.returncode, answered.stderr) == (
            3,
            f"{in_use}job 2's teaparty run is asking it: answer gate 2 at that run's terminal\n",
        )
        other = teaparty("jobs", "answer", "1", "yes", home=home)
        assert (other.returncode, other.stderr) == (
            3,
            f"{in_use}it is another job's teaparty run: answer here once it ends\n",
        )
        fix = ("run", "--repo", str(repo), "--title", "Fix typo", "--yes")
        second = teaparty(*fix, home=home)
        assert second.returncode == 3
        assert second.stderr.splitlines()[-2:] == [
            f"teaparty run: {home / 'teaparty.db'} is in use by another teaparty process "
            f"(lock {home / 'teaparty.db.lock'})",
            "  a teaparty run or teaparty serve is using this state directory: wait for it to "
            "end, or give this run a state directory of its own with --home DIR",
        ]
        beside = teaparty(*fix, home=tmp_path / "own")
        assert beside.returncode == 0, beside.stderr
        term.send("yes\n")
        assert term.wait() == 0, term.output
    assert here("answer", "1", "yes", home=home).returncode == 0, "once the run has ended"
