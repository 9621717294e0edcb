"""`teaparty run` as people meet it: a real process, and a real terminal where it matters.

Every run is a new job; `--resume ID` continues one and runs nothing of other jobs;
Ctrl-C at the prompt stops at once, without a traceback, saying how to continue; ordinary
mistakes get one clear line and the documented exit code.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from jobs_cli_support import jobs_json, teaparty
from local_repo import ENV, git, make_repo
from terminal import Terminal

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "widgets")


def test_titles_that_slug_alike_are_two_jobs(repo: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    first = teaparty("run", "--title", "Add docs", "--yes", home=home, cwd=repo)
    second = teaparty("run", "--title", "ADD DOCS!!", "--yes", home=home, cwd=repo)
    assert (first.returncode, second.returncode) == (0, 0), first.stderr + second.stderr
    assert "job 1 started: branch teaparty/job-1-add-docs" in first.stdout
    assert "job 2 started: branch teaparty/job-2-add-docs" in second.stdout
    assert "answered 'yes' automatically (--yes)" in first.stdout
    branches = git(repo, "branch", "--list", "teaparty/*", "--format=%(refname:short)")
    assert branches.split() == ["teaparty/job-1-add-docs", "teaparty/job-2-add-docs"]


def test_a_run_spends_nothing_on_other_jobs_in_the_store(repo: Path, tmp_path: Path) -> None:
    """Jobs A and B wait, runnable, in the store; job C's run leaves them as they were."""
    home = tmp_path / "home"
    for title in ("job A", "job B"):
        parked = teaparty("run", "--title", title, "--no-input", home=home, cwd=repo)
        assert parked.returncode == 4, parked.stderr
    before = transcripts(home)
    assert teaparty("run", "--title", "job C", "--yes", home=home, cwd=repo).returncode == 0
    after = transcripts(home)
    assert {job: n for job, n in after.items() if job != 3} == before
    assert after[3] > 0


def transcripts(home: Path) -> dict[int, int]:
    """Messages in each job's conversations, by job id."""
    import sqlite3

    with sqlite3.connect(home / "teaparty.db") as db:
        rows = db.execute(
            "SELECT c.job_id, count(m.seq) FROM conversations c"
            " LEFT JOIN messages m ON m.conversation_id = c.conversation_id GROUP BY c.job_id"
        ).fetchall()
    return {int(job): int(n) for job, n in rows}


def test_a_question_nobody_can_answer_parks_the_job_and_resume_answers_it(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    parked = teaparty("run", "--title", "Add docs", home=home, cwd=repo, stdin="")  # no terminal
    assert parked.returncode == 4
    assert "job 1 waits at gate 1 (plan): The plan: 1 task.\n" in parked.stderr
    assert f"teaparty run --repo {repo} --resume 1" in parked.stderr
    assert "Traceback" not in parked.stderr
    done = teaparty("run", "--resume", "1", "--yes", home=home, cwd=repo)
    assert done.returncode == 0, done.stderr
    assert "job 1 resumed: branch teaparty/job-1-add-docs" in done.stdout
    assert git(repo, "log", "--format=%s", "teaparty/job-1-add-docs", "--not", "main").strip()


def test_a_rejected_plan_ends_without_delivering_exit_1(repo: Path, tmp_path: Path) -> None:
    """No, and nothing to change it by: the job ends there, its task cancelled, and the
    person reads what happened, not the engine's word to the lead."""
    body = tmp_path / "body.md"
    body.write_text("Please.\n")
    argv = [*CLI, "run", "--title", "Add docs", "--body-file", str(body), *local(tmp_path)]
    with Terminal(argv, repo, ENV) as term:
        term.expect("your answer [yes/no]: ")
        term.send("maybe later\n")
        term.expect("please answer yes or no")
        term.send("no\n")
        term.expect("what should the lead change? (Enter alone ends the job): ")
        term.send("\n")
        code = term.wait()
    assert code == 1
    assert "result: The plan was rejected (" in term.output
    assert "answered 'no'), so nothing was done." in term.output
    assert "Change the board" not in term.output, "the engine's word to the lead"
    assert git(repo, "branch", "--list", "teaparty/*") == ""
    [task] = jobs_json("show", "1", home=tmp_path / "home")["tasks"]
    assert task["state"] == "cancelled"


def test_a_plan_rejected_with_words_is_planned_again_by_them(repo: Path, tmp_path: Path) -> None:
    """No, with what to change: the lead plans again by those words, and the new plan is
    put to the person, who approves it; the work is done as asked."""
    argv = [*CLI, "run", "--title", "Add docs", *local(tmp_path)]
    with Terminal(argv, repo, ENV) as term:
        term.expect("your answer [yes/no]: ")
        term.send("no\n")
        term.expect("what should the lead change? (Enter alone ends the job): ")
        term.send("mention the changelog too\n")
        term.expect("Changed as the decider asked: mention the changelog too")
        term.expect("your answer [yes/no]: ")
        term.send("yes\n")
        code = term.wait()
    assert code == 0, term.output
    assert "The plan: 1 task." in term.output.split("Changed as the decider asked")[0]
    shown = jobs_json("show", "1", home=tmp_path / "home")
    assert [(t["number"], t["state"]) for t in shown["tasks"]] == [(1, "cancelled"), (2, "done")]
    answers = [g["answer"] for g in shown["gates"]]
    assert answers == ["no (mention the changelog too)", "yes"]
    recorded = git(repo, "show", "teaparty/job-1-add-docs:docs/requests/add-docs.md")
    assert "Add docs" in recorded


CLI = [sys.executable, "-m", "bot.cli"]


def local(tmp_path: Path) -> list[str]:
    """The options of a local run in this test's state directory, on the scripted model."""
    return ["--home", str(tmp_path / "home"), "--model", "scripted"]


def test_ctrl_c_at_the_prompt_stops_at_once_and_says_how_to_resume(
    repo: Path, tmp_path: Path
) -> None:
    with Terminal([*CLI, "run", "--title", "Add docs", *local(tmp_path)], repo, ENV) as term:
        term.expect("your answer [yes/no]: ")
        term.send("\x03")  # Ctrl-C: the terminal sends SIGINT to the foreground group
        code = term.wait()  # the prompt would wait for ever
    assert code == 130
    assert "Traceback" not in term.output
    assert f"Job 1 is saved; continue it with: teaparty run --repo {repo} --resume 1" in term.output
    with Terminal([*CLI, "run", "--resume", "1", *local(tmp_path)], repo, ENV) as term:
        term.expect("your answer [yes/no]: ")
        term.send("y\n")
        assert term.wait() == 0
    interrupted = git(repo, "rev-parse", "teaparty/job-1-add-docs^{tree}")
    untouched = tmp_path / "untouched"
    subprocess.run(["git", "clone", "-q", str(repo), str(untouched)], check=True, env=ENV)
    run = teaparty("run", "--title", "Add docs", "--yes", home=tmp_path / "h2", cwd=untouched)
    assert run.returncode == 0
    assert git(untouched, "rev-parse", "teaparty/job-1-add-docs^{tree}") == interrupted


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["run", "--title", "   "], None, "a title is needed (--title TEXT), or --resume ID"),
        (
            ["run", "--title", "x", "--body-file", "missing.md"],
            None,
            "--body-file missing.md: No such file",
        ),
        (["run", "--resume", "0"], None, "--resume 0: job ids start at 1"),
        (["run", "--resume", "7"], None, "no job 7 in this state directory"),
    ],
)
def test_ordinary_mistakes_get_one_line_and_exit_2(
    repo: Path, tmp_path: Path, args: list[str], stdin: str | None, message: str
) -> None:
    result = teaparty(*args, home=tmp_path / "home", cwd=repo, stdin=stdin)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_the_issue_text_can_come_from_standard_input(repo: Path, tmp_path: Path) -> None:
    result = teaparty(
        "run",
        "--title",
        "Add docs",
        "--body-file",
        "-",
        "--yes",
        home=tmp_path / "home",
        cwd=repo,
        stdin="Docs, from stdin.\n",
    )
    assert result.returncode == 0, result.stderr
    recorded = git(repo, "show", "teaparty/job-1-add-docs:docs/requests/add-docs.md")
    assert "Docs, from stdin." in recorded


def test_repositories_a_job_cannot_start_from(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    result = teaparty("run", "--title", "x", home=tmp_path / "home", cwd=empty)
    assert (result.returncode, result.stderr.strip()) == (
        2,
        f"teaparty run: {empty} has no commits yet: a job starts from HEAD, so commit first",
    )
    nowhere = teaparty("run", "--title", "x", home=tmp_path / "home", cwd=tmp_path)
    assert (nowhere.returncode, nowhere.stderr.strip()) == (
        2,
        f"teaparty run: {tmp_path} is not a git repository",
    )


def test_a_dirty_tree_is_named_and_left_out(repo: Path, tmp_path: Path) -> None:
    (repo / "README.md").write_text("changed\n")
    (repo / "notes.txt").write_text("new\n")
    result = teaparty("run", "--title", "Add docs", "--yes", home=tmp_path / "h", cwd=repo)
    assert result.returncode == 0
    assert "note: the job starts from HEAD; not included: README.md, notes.txt" in result.stderr
    assert git(repo, "show", "teaparty/job-1-add-docs:README.md") == "widgets\n"


def test_the_anthropic_model_needs_its_key_before_anything_starts(
    repo: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = subprocess.run(
        [*CLI, "run", "--title", "x", "--model", "anthropic", "--home", str(home)],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=repo,
        timeout=60,
    )
    assert (result.returncode, result.stderr.strip()) == (
        2,
        "teaparty run: --model anthropic needs ANTHROPIC_API_KEY in the environment",
    )
    assert not home.exists(), "no job was created"


def test_the_demo_runs_again_on_the_same_relative_home(tmp_path: Path) -> None:
    for n in (1, 2):
        result = subprocess.run(
            [*CLI, "demo", "--home", "demo-state"],
            capture_output=True,
            text=True,
            env=ENV,
            cwd=tmp_path,
            timeout=100,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert f"the demo's state: {tmp_path / 'demo-state' / f'run-{n}'}" in result.stdout


def test_ctrl_c_stops_the_demo_at_once_without_a_traceback(tmp_path: Path) -> None:
    with Terminal([*CLI, "demo", "--home", str(tmp_path / "state")], tmp_path, ENV) as term:
        term.expect("teaparty serve at")
        term.send("\x03")
        code = term.wait()
    assert code == 130, term.output  # a demo that went on would end 0
    assert "interrupted: the demo stopped." in term.output
    assert "Traceback" not in term.output, term.output


def test_a_job_never_builds_on_or_moves_a_branch_it_did_not_make(
    repo: Path, tmp_path: Path
) -> None:
    """Job ids restart in each state directory, so the branch a new job wants can be another
    state directory's job's, or a person's (here checked out, on an unrelated commit): the job
    takes the next free name, and the others stay where they were."""
    title = "Add a mul function to calc.py with a test"
    wanted = "teaparty/job-1-add-a-mul-function-to-calc-py-with-a"  # slugs: 40, whole words
    checkout = tmp_path / "theirs"
    git(repo, "worktree", "add", "-q", "--detach", str(checkout))
    git(checkout, "checkout", "-q", "--orphan", wanted)
    (checkout / "unrelated.txt").write_text("a person's own work\n")
    git(checkout, "add", "unrelated.txt")
    git(checkout, "commit", "-qm", "unrelated")
    theirs = git(repo, "rev-parse", wanted).strip()
    main = git(repo, "rev-parse", "main").strip()

    first = teaparty("run", "--title", title, "--yes", home=tmp_path / "home-a", cwd=repo)
    assert first.returncode == 0, first.stderr
    assert f"job 1 started: branch {wanted}-2" in first.stdout
    second = teaparty("run", "--title", title, "--yes", home=tmp_path / "home-b", cwd=repo)
    assert second.returncode == 0, second.stderr
    assert f"job 1 started: branch {wanted}-3" in second.stdout, "job 1 of home-a made -2"

    assert git(repo, "rev-parse", wanted).strip() == theirs, "the person's branch never moved"
    assert git(checkout, "status", "--porcelain").strip() == "", "nor their checkout"
    for made in (f"{wanted}-2", f"{wanted}-3"):
        assert git(repo, "merge-base", made, main).strip() == main, f"{made} starts at main"
        assert "unrelated" not in git(repo, "log", "--format=%s", made)
    resumed = teaparty("run", "--resume", "1", "--yes", home=tmp_path / "home-a", cwd=repo)
    assert resumed.returncode == 2, "a done job is not resumed; it names its own branch"
    assert f"job 1 is done: its branch was {wanted}-2; nothing to resume" in resumed.stderr


def test_delivering_over_a_branch_made_meanwhile_says_what_to_do(
    repo: Path, tmp_path: Path
) -> None:
    """A person makes the branch the job took while it waits at its plan (and checks it out in
    a worktree): delivery moves neither; the run says which checkout holds it, or that the
    branch is not the job's, and how to resume, never git's raw words."""
    home = tmp_path / "home"
    parked = teaparty("run", "--title", "Add docs", "--no-input", home=home, cwd=repo)
    assert parked.returncode == 4, parked.stderr
    branch, checkout = "teaparty/job-1-add-docs", tmp_path / "checkout"
    git(repo, "worktree", "add", "-q", "-b", branch, str(checkout), "main")
    held = teaparty("run", "--resume", "1", "--yes", home=home, cwd=repo)
    said = held.stdout + held.stderr
    assert held.returncode == 1, said
    assert f"branch {branch} is checked out in {checkout}" in said
    assert "refusing to update" not in said
    assert "Traceback" not in said
    assert "teaparty run --resume 1" in said

    git(repo, "worktree", "remove", str(checkout))  # the branch stays: the person's
    theirs = teaparty("run", "--resume", "1", "--yes", home=home, cwd=repo)
    assert f"has a branch {branch} this job did not make" in theirs.stdout + theirs.stderr
    assert git(repo, "rev-parse", branch).strip() == git(repo, "rev-parse", "main").strip()

    git(repo, "branch", "-D", branch)
    done = teaparty("run", "--resume", "1", "--yes", home=home, cwd=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert git(repo, "log", "--format=%s", branch, "--not", "main").strip()


def test_answers_given_with_yes_teach_the_proxy_nothing(repo: Path, tmp_path: Path) -> None:
    """`--yes` answers for the decider without asking them: those answers are stored as given
    on their behalf, so six runs leave the proxy with no decision to learn from, and the plan
    question still goes to the decider (here nobody can answer it: the run parks)."""
    home = tmp_path / "home"
    for n in range(6):
        done = teaparty("run", "--title", f"Add docs {n}", "--yes", home=home, cwd=repo)
        assert done.returncode == 0, done.stderr
    stats = subprocess.run(
        [sys.executable, "-m", "bot.cli", "proxy", "stats", "--home", str(home), "--json"],
        capture_output=True,
        text=True,
        env=ENV,
        timeout=60,
        check=True,
    )
    (plan,) = json.loads(stats.stdout)
    assert (plan["kind"], plan["gates"], plan["decisions"], plan["alone"]) == ("plan", 6, 0, 0)
    parked = teaparty("run", "--title", "Add docs again", "--no-input", home=home, cwd=repo)
    assert parked.returncode == 4, parked.stdout + parked.stderr
    assert "waits at gate 7 (plan): The plan:" in parked.stderr


def test_a_reader_that_leaves_early_strands_nothing(repo: Path, tmp_path: Path) -> None:
    """`teaparty run … | head -1`: the reader leaves after the first line (written before the
    job exists); the run says once, on standard error, that it goes on, answers its questions
    as `--yes` says, and ends 0 with the work delivered, without a traceback."""
    argv = [*CLI, "run", "--title", "Add docs", "--yes", *local(tmp_path)]
    with subprocess.Popen(
        argv, cwd=repo, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    ) as run:
        assert run.stdout is not None
        assert run.stderr is not None
        first = run.stdout.readline()
        os.kill(run.pid, signal.SIGSTOP)  # the reader leaves before the run writes again
        run.stdout.close()
        os.kill(run.pid, signal.SIGCONT)
        said = run.stderr.read()
        code = run.wait(timeout=90)
    assert first == "no ANTHROPIC_API_KEY: using the scripted stand-in for the model\n"
    assert code == 0, said
    assert "Traceback" not in said
    assert "standard output was closed; job 1 goes on, its outcome is the exit code" in said
    assert git(repo, "log", "--format=%s", "teaparty/job-1-add-docs", "--not", "main").strip()
