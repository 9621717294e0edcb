"""How `teaparty jobs` words what it prints: no text moves the terminal, waits say until
when, a job that cannot be priced says so, a failed tool call is marked."""

from __future__ import annotations

from bot import jobs_json, jobs_text
from orchestrator.api import JobOrigin, JobSummary, LogEntry
from orchestrator.bus.waits import Wait
from orchestrator.core.messages import Message, Usage

NOW = 1_800_000_000.0


def summary(**changes: object) -> JobSummary:
    base: dict[str, object] = {
        "job_id": 7,
        "job_key": "github:octo/widgets#12",
        "origin": JobOrigin.of_key("github:octo/widgets#12"),
        "title": "Add docs",
        "state": "working",
        "step": "working on #1 Add docs",
        "open_gates": 0,
        "usage": Usage(),
        "cost_usd": 0.25,
        "created_at": NOW - 7_200,
        "updated_at": NOW - 60,
    }
    return JobSummary(**(base | changes))  # type: ignore[arg-type]


def test_text_from_agents_cannot_drive_the_terminal() -> None:
    hostile = "done\x1b]0;owned\x07 \x1b[2J\rreal\tok\nnext \x9b"
    assert (
        jobs_text.printable(hostile) == "done\\x1b]0;owned\\x07 \\x1b[2J\\x0dreal\tok\nnext \\x9b"
    )
    [row] = jobs_text.table([summary(title="\x1b[31mred")], now=NOW)[1:]
    assert row.endswith("\\x1b[31mred")


def test_a_wait_says_what_it_waits_for_and_until_when() -> None:
    wait = Wait("forge:7", 7, "forge", "rate limited", NOW - 30, NOW + 90, 1)
    assert jobs_text.state(summary(waiting=wait), now=NOW) == (
        "working (GitHub's rate limit; again at 08:01:30 UTC)"
    )
    later = Wait("job:7", 7, "model", "overloaded", NOW, NOW + 3 * 86_400, 4)
    assert jobs_text.state(summary(waiting=later), now=NOW) == (
        "working (the model is unavailable; again at 2027-01-18 08:00 UTC)"
    )
    assert jobs_json.summary(summary(waiting=later), now=NOW)["waiting"] == {
        "kind": "model",
        "reason": "overloaded",
        "since": "2027-01-15T08:00:00Z",
        "until": "2027-01-18T08:00:00Z",
    }


def test_ages_costs_and_where_a_job_comes_from() -> None:
    assert [jobs_text.age(s) for s in (-1, 45, 60, 7_199, 90_000)] == [
        "0s",
        "45s",
        "1m",
        "1h",
        "1d",
    ]
    assert jobs_text.cost(summary(cost_usd=None)) == "?"
    assert jobs_text.where(summary()) == "octo/widgets#12"
    other = summary(job_key="job-7", origin=JobOrigin.of_key("job-7"))
    assert jobs_text.where(other) == "job-7"
    assert jobs_json.summary(summary(cost_usd=None), now=NOW)["cost_usd"] is None


def test_a_failed_tool_call_and_an_unknown_call_are_named() -> None:
    transcript = jobs_text.Transcript(now=NOW)
    call = Message(
        "c", 1, "lead", "assistant", {"text": "", "tool_calls": [{"id": "t1", "name": "shell"}]}
    )
    failed = Message("c", 2, "lead", "tool", {"call_id": "t1", "text": "no", "is_error": True})
    stray = Message("c", 3, "om", "tool", {"call_id": "t9", "text": "late"})
    lines = [
        line
        for n, message in enumerate((call, failed, stray))
        for line in transcript.lines(LogEntry(n, NOW, "lead", message))
    ]
    assert lines == [
        "08:00:00 UTC  lead",
        "    -> shell {}",
        "08:00:00 UTC  lead <- shell, an error",
        "    no",
        "08:00:00 UTC  om -> lead  [answers a call]",
        "    late",
    ]
    assert jobs_json.entry(LogEntry(2, NOW, "lead", failed))["is_error"] is True
