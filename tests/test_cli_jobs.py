"""`teaparty jobs list/show/log` as people and scripts meet them, over a state directory
holding a done, a failed, a parked and a cancelled job, each made by running it: real
processes for what a process shows (exit codes, one-line errors), the command line in this
process for the text and JSON it prints."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jobs_cli_support import (
    CANCELLED,
    DONE,
    FAILED,
    PARKED,
    USER,
    Store,
    four_jobs,
    here,
    jobs_json,
    teaparty,
)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    return four_jobs(tmp_path_factory.mktemp("jobs"))


def test_list_shows_every_job_in_its_state(store: Store) -> None:
    result = teaparty("jobs", "list", home=store.home)
    assert result.returncode == 0, result.stderr
    header, *rows = result.stdout.splitlines()
    assert header.split() == ["ID", "REPOSITORY/ISSUE", "STATE", "GATES", "COST", "AGE", "TITLE"]
    cells = [row.split() for row in rows]
    assert [(c[0], c[2], c[3], c[4], " ".join(c[6:])) for c in cells] == [
        ("4", "cancelled", "0", "$0.0000", "Drop it"),
        ("3", "waiting", "1", "$0.0000", "Park it"),
        ("2", "failed", "0", "$0.0000", "Break it"),
        ("1", "done", "0", "$0.0000", "Add docs"),
    ]
    assert {c[1] for c in cells} == {str(store.repo)}


def test_list_as_json_and_filtered(store: Store) -> None:
    listed = jobs_json("list", home=store.home, in_process=True)
    assert [(j["id"], j["state"], j["open_gates"]) for j in listed] == [
        (CANCELLED, "cancelled", 0),
        (PARKED, "waiting", 1),
        (FAILED, "failed", 0),
        (DONE, "done", 0),
    ]
    parked = listed[1]
    assert parked["key"].startswith(f"local:{store.repo}:")
    assert (parked["origin"], parked["repository"], parked["issue"]) == (
        "local",
        str(store.repo),
        None,
    )
    assert parked["step"] == "waiting for an answer to a question"
    assert (parked["waiting"], parked["cost_usd"]) == (None, 0.0)
    assert parked["tokens"] == {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0}
    assert parked["created_at"].endswith("Z")
    assert 0 <= parked["age_seconds"] < 600

    def ids(*filters: str) -> list[int]:
        return [j["id"] for j in jobs_json("list", *filters, home=store.home, in_process=True)]

    assert ids("--state", "waiting") == [PARKED]
    assert ids("--state", "active") == [PARKED, FAILED]
    assert ids("--state", "ended") == [CANCELLED, DONE]
    assert ids("--repo", str(store.repo)) == [CANCELLED, PARKED, FAILED, DONE]
    assert ids("--repo", "widgets") == [CANCELLED, PARKED, FAILED, DONE]
    assert ids("--repo", "octo/gadgets") == []
    nothing = here("list", "--repo", "gadgets", home=store.home)
    assert nothing.stdout == "no jobs\n"


def test_show_is_each_jobs_tracking_view(store: Store) -> None:
    done = here("show", str(DONE), home=store.home).stdout
    assert done.startswith("job 1: Add docs\n")
    assert "  state       done\n" in done
    assert "  branch      teaparty/job-1-add-docs\n" in done
    assert "/jobs/job-1--add-docs/worktree (removed)" in done
    assert "  #1 [done] Add docs - Record: Add docs" in done
    assert f"answered by {USER} (--yes): yes" in done
    assert "result\n  Done. Task #1 merged into teaparty/job-1-add-docs" in done

    failed = here("show", str(FAILED), home=store.home).stdout
    assert "  state       failed: stopped by an error\n" in failed
    assert "  last error  delivering the work failed: git push" in failed
    assert "cannot lock ref 'refs/heads/teaparty/job-2-break-it'" in failed

    parked = here("show", str(PARKED), home=store.home).stdout
    assert "  state       waiting: waiting for an answer to a question\n" in parked
    assert "  #3 open  plan, asked by the engine" in parked
    assert "The plan: 1 task." in parked
    assert "1. Park it (workgroup coding" in parked
    assert "[yes/no]" in parked

    cancelled = here("show", str(CANCELLED), home=store.home).stdout
    assert "  state       cancelled\n" in cancelled
    assert "  #4 closed  plan" in cancelled
    assert f"  #1 cancel by {USER} (teaparty jobs cancel) at" in cancelled
    assert "done: job 4 cancelled: 1 open gate closed, 2 conversations stopped" in cancelled


def test_show_as_json(store: Store) -> None:
    failed = jobs_json("show", str(FAILED), home=store.home)
    assert failed["state"] == "failed"
    assert failed["last_error"].startswith("delivering the work failed: git push")
    assert [e["key"] for e in failed["errors"]] == ["delivery:2"]
    assert [(t["number"], t["state"], t["review"]) for t in failed["tasks"]] == [
        (1, "done", "spec-only")
    ]
    assert failed["worktree_present"] is True, "a failed job is resumed in its worktree"

    cancelled = jobs_json("show", str(CANCELLED), home=store.home)
    [gate] = cancelled["gates"]
    assert (gate["id"], gate["state"], gate["options"], gate["answer"]) == (
        4,
        "closed",
        ["yes", "no"],
        None,
    )
    assert gate["closed_at"].endswith("Z")
    [cancel] = cancelled["commands"]
    assert (cancel["kind"], cancel["state"], cancel["requested_by"]) == (
        "cancel",
        "done",
        f"{USER} (teaparty jobs cancel)",
    )
    assert cancelled["branch"] == "teaparty/job-4-drop-it"
    assert cancelled["worktree_present"] is True, "kept for a look until jobs clean"


def test_log_is_the_transcript_in_order_with_roles(store: Store) -> None:
    text = here("log", str(DONE), home=store.home).stdout
    order = [
        "engine -> office-manager  [request]",
        "  office-manager\n    -> send {",
        "office-manager -> widgets/project-lead  [request]",
        "widgets/project-lead <- task_create",
        "  widgets/project-lead\n    -> dispatch {",  # held at the plan gate, then run
        "widgets/coding/implementer\n    -> write_file {",
        "widgets/coding/implementer -> widgets/coding/mini-team  [answers send]",
        "widgets/project-lead -> office-manager  [answers send]",
    ]
    places = [text.index(part) for part in order]
    assert places == sorted(places)
    assert "    Done. Task #1 merged into teaparty/job-1-add-docs" in text

    lines = here("log", str(DONE), "--json", home=store.home).stdout.splitlines()
    entries = [json.loads(line) for line in lines]
    assert [e["id"] for e in entries] == sorted(e["id"] for e in entries)
    first = entries[0]
    assert (first["agent"], first["sender"], first["role"], first["kind"]) == (
        "office-manager",
        "engine",
        "user",
        "request",
    )
    runs = [e for e in entries if any(c["name"] == "dispatch" for c in e["tool_calls"])]
    assert runs[0]["tool_calls"][0]["args"] == {
        "task": 1,
        "brief": "Write docs/requests/add-docs.md.",
    }
    outcome = next(e for e in entries if e["call_id"] == runs[0]["tool_calls"][0]["id"])
    assert outcome["role"] == "tool"
    assert outcome["text"].startswith("Task #1 merged into teaparty/job-1-add-docs")


def test_following_an_ended_job_prints_it_and_stops(store: Store) -> None:
    followed = here("log", str(CANCELLED), "--follow", home=store.home)
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.endswith("job 4 cancelled: cancelled\n")
    assert followed.stdout.startswith(here("log", "4", home=store.home).stdout)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["show", "9"], 1, "teaparty jobs show: no job 9 in this state directory"),
        (["log", "9"], 1, "teaparty jobs log: no job 9 in this state directory"),
        (["cancel", "1"], 1, "teaparty jobs cancel: job 1 has already ended (done): nothing"),
        (["answer", "1", "yes"], 1, "teaparty jobs answer: job 1 has no open question"),
        (["answer", "4", "yes"], 1, "teaparty jobs answer: job 4 has no open question"),
        (["answer", "3", "maybe"], 2, "teaparty jobs answer: gate 3 takes yes or no, not 'maybe'"),
        (["answer", "3", "yes", "--gate", "1"], 1, "gate 1 is not an open question of job 3"),
        (["list", "--state", "asleep"], 2, "invalid choice: 'asleep'"),
    ],
)
def test_mistakes_get_one_line_and_their_exit_code(
    store: Store, args: list[str], code: int, message: str
) -> None:
    result = teaparty("jobs", *args, home=store.home)
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_a_state_directory_without_jobs(tmp_path: Path) -> None:
    assert teaparty("jobs", "list", home=tmp_path).stdout == "no jobs\n"
    assert jobs_json("list", home=tmp_path) == []
    shown = teaparty("jobs", "show", "1", home=tmp_path)
    assert (shown.returncode, shown.stderr) == (
        1,
        "teaparty jobs show: no job 1 in this state directory\n",
    )
    assert not (tmp_path / "teaparty.db").exists(), "reading made no store"
