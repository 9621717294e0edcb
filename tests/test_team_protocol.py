"""The mini-team's step records: JSON the coordinator reads back typed, old stored text included."""

from __future__ import annotations

import json

from orchestrator.teams.protocol import (
    Merged,
    Prepared,
    Reviewed,
    StepFailed,
    decode,
    encode,
)

PREPARED = Prepared(
    task=1,
    title="Add a flag",
    spec="The CLI accepts --verbose.",
    review="full",
    rounds=3,
    worker="implementer",
    reviewers=("spec-reviewer", "quality-reviewer"),
    fallback_reviewers=("spec-reviewer", "quality-reviewer"),
    phase_reviewer="phase-reviewer",
    branch="teaparty/job-1-x--task-1",
    job_branch="teaparty/job-1-x",
)


def test_a_record_survives_its_json() -> None:
    assert decode(Prepared, encode(PREPARED)) == PREPARED
    merged = Merged(merged="abc", last=True, base="b", request="r", board="#1", phase_reviews=1)
    assert decode(Merged, encode(merged)) == merged


def test_text_the_previous_release_stored_still_reads() -> None:
    old = {  # what team_prepare returned as a dict: lists, and `conflicts` always present
        "task": 1, "title": "Add a flag", "spec": "s", "review": "none", "rounds": 3,
        "worker": "implementer", "reviewers": [], "fallback_reviewers": ["spec-reviewer"],
        "phase_reviewer": None, "branch": "b", "job_branch": "j", "resolves": None,
        "conflicts": [],
    }  # fmt: skip
    prepared = decode(Prepared, json.dumps(old))
    assert isinstance(prepared, Prepared)
    assert prepared.fallback_reviewers == ("spec-reviewer",)
    assert decode(Reviewed, '{"base": "a", "head": "b", "commits": 2}') == Reviewed("a", "b", 2)
    conflict = decode(Merged, '{"conflicts": ["a.py"], "hunks": "<<<<"}')
    assert conflict == Merged(conflicts=("a.py",), hunks="<<<<")


def test_a_missing_or_mistyped_field_is_a_step_failure_naming_it() -> None:
    broken = json.loads(encode(PREPARED))
    del broken["worker"]
    broken["rounds"] = "three"
    assert decode(Prepared, json.dumps(broken)) == StepFailed(
        "unexpected Prepared result (rounds, worker)"
    )
    assert decode(Reviewed, "not json") == StepFailed("unexpected Reviewed result ((all))")


def test_an_error_result_is_a_step_failure_with_its_text() -> None:
    assert decode(Prepared, "team_prepare: no slot", is_error=True) == StepFailed(
        "team_prepare: no slot"
    )
