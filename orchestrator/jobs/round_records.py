"""What review rounds are made of, as the engine and the edge pass them: a reviewer's point,
the feedback that brings points, a round as stored with its numbered points, what became of
feedback, and a job's change request. The rounds themselves (their table, their states) are
`jobs/rounds.py`; the brief an office manager is sent, `jobs/round_brief.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from orchestrator.core.errors import OrchestratorError

RoundState = Literal["queued", "asked", "running", "delivered", "stopped"]
PullState = Literal["open", "draft", "merged", "closed", "gone"]
Action = Literal["change", "answer", "disagree"]
ACTIONS: tuple[Action, ...] = ("change", "answer", "disagree")
CI_AUTHOR = "ci"  # who a failing check's point is from (jobs/ci_rounds.py)


class RoundError(OrchestratorError):
    """A review round cannot take what was asked of it (no such round or point)."""


@dataclass(frozen=True)
class Point:
    """One thing a reviewer said that a round may act on.

    `source` names what it came from and the newest comment it carries (`review:ID`,
    `thread:ID:COMMENT`, `comment:ID`): the same source is taken once. A thread's point
    replies in `thread_id`; `comment_id` is its newest comment (the REST reply goes to it).
    """

    source: str
    author: str
    body: str
    thread_id: str | None = None
    comment_id: int | None = None
    path: str | None = None
    line: int | None = None
    hunk: str | None = None
    outdated: bool = False


@dataclass(frozen=True)
class Feedback:
    """What one review (or a gathered set of comments) brought: who asked, and its points."""

    reviewers: tuple[str, ...]
    points: tuple[Point, ...]


@dataclass(frozen=True)
class RoundPoint:
    """A point of a round, numbered, with the lead's answer once given."""

    number: int
    point: Point
    action: Action | None = None
    reply: str | None = None
    replied_ref: str | None = None


@dataclass(frozen=True)
class ReviewRound:
    """A round as stored."""

    round_id: int
    job_id: int
    number: int
    state: RoundState
    reviewers: tuple[str, ...]
    points: tuple[RoundPoint, ...] = ()
    gate_id: int | None = None
    head: str | None = None
    outcome: str | None = None


@dataclass(frozen=True)
class Taken:
    """What became of feedback: the round it joined (None: nothing new), how many points it
    added, and whether that round is now running, waiting, or asked about (a gate)."""

    round_number: int | None
    added: int
    state: RoundState | None
    gate_id: int | None = None
    woken: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class Pull:
    """A job's change request as recorded."""

    job_id: int
    number: int
    url: str
    state: PullState
