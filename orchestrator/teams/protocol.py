"""What the mini-team's coordinator and its engine-side steps say to each other, typed.

Each step's result is stored as the JSON of one of these records (a tool result in the
task conversation's transcript) and read back by the coordinator through `decode`, so a
renamed or missing field is a type error in the code and a clear error for stored text,
never a silent `KeyError`. Field names are the JSON keys stores already hold.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TypeVar

from pydantic import TypeAdapter, ValidationError

T = TypeVar("T")
PREPARE, REVIEW, CHECK, MERGE, PHASE, FINISH = (  # the steps, as the coordinator calls them
    "team_prepare",
    "team_review",
    "team_check",
    "team_merge",
    "team_phase",
    "team_finish",
)


@dataclass(frozen=True)
class Prepared:
    """team_prepare: the task, its mini-team and the worktree it was given."""

    task: int
    title: str
    spec: str
    review: str
    rounds: int
    worker: str
    reviewers: tuple[str, ...]
    fallback_reviewers: tuple[str, ...]
    phase_reviewer: str | None
    branch: str
    job_branch: str
    resolves: int | None = None
    conflicts: tuple[str, ...] = ()
    merges_base: str | None = None  # the base commit this task merges in (a review round's)
    checks: tuple[str, ...] = ()  # the project's check commands the engine runs (setup:)
    instructions: str = ""  # the repository's instruction files scoped to the task's paths
    learned: tuple[str, ...] = ()  # past learnings found for the task, one line each (memory/)


@dataclass(frozen=True)
class Reviewed:
    """team_review: the worker's change as commits on the task branch."""

    base: str
    head: str | None
    commits: int
    stripped: tuple[str, ...] = ()
    # `git diff base..head` where it is at most DIFF_MAX characters, so that a reviewer
    # reads it in its brief instead of asking for it ("" when longer, or before this field).
    diff: str = ""


DIFF_MAX = 24_000  # characters of a change a reviewer's brief holds


@dataclass(frozen=True)
class Merged:
    """team_merge: the merge commit (and, after the last task, what the phase review reads),
    or the conflicts that stopped it."""

    merged: str | None = None
    last: bool = False
    conflicts: tuple[str, ...] | None = None
    hunks: str | None = None
    job_head: str | None = None  # on a conflict: the job branch's and the task's commits
    task_head: str | None = None
    base: str | None = None
    request: str = ""
    board: str = ""
    phase_reviews: int = 0
    solo: bool = False  # the job's one task, reviewed: its review was of the whole job


@dataclass(frozen=True)
class PhaseTasks:
    """team_phase: the tasks the phase review's points became."""

    created: tuple[int, ...] = ()


@dataclass(frozen=True)
class Finished:
    """team_finish: how the task ended. (team_check's result is setup/checks.py `Checked`.)"""

    outcome: str


@dataclass(frozen=True)
class StepFailed:
    """A step that failed (its error result), or a result that does not read as its record."""

    error: str


def encode(record: object) -> str:
    """A step's record as the JSON text its tool result holds."""
    return json.dumps(asdict(record))  # type: ignore[call-overload]  # a dataclass instance


def decode(kind: type[T], text: str, *, is_error: bool = False) -> T | StepFailed:
    """Read a step's result as `kind`; an error result or unreadable text is a StepFailed."""
    if is_error:
        return StepFailed(text)
    try:
        return TypeAdapter(kind).validate_json(text or "{}")
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) or "(all)" for e in exc.errors())
        return StepFailed(f"unexpected {kind.__name__} result ({fields})")
