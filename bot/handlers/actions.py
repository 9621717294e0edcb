"""What a handler decided to do about one delivery: actions as plain values, performed after.

A decision is a tuple of actions, built by a pure function from the delivery's command and
the facts its handler gathered; `perform.perform` carries them out in order on the
delivery's issue, each by the performer its type has in `perform.PERFORMERS`. The last
action that says what came of the delivery (`Ignore`, `Report`, `StartJob`, `AnswerGate`,
`Advise`, `Reassign`, `ReviseIssue`, and what follows a job's label: `EndPull`, `SetPull`,
`WithdrawJob`, `LeaveRepos`) gives the outcome the delivery worker logs and stores; `Later`
puts the delivery back to be decided again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from bot.github.subject import Subject
from orchestrator.api import Project

Outcome = tuple[str, int | None]  # what came of a delivery, and the job it touched


@dataclass(frozen=True)
class Ignore:
    """Nothing to do; `reason` says why (logged as `ignored: …`)."""

    reason: str
    job_id: int | None = None

    @property
    def outcome(self) -> Outcome:
        """`ignored: <reason>`, and the job the delivery was about, if any."""
        return f"ignored: {self.reason}", self.job_id


@dataclass(frozen=True)
class Report:
    """Nothing (more) to do, for a reason worth its own words: a refusal, a broken config."""

    text: str
    job_id: int | None = None

    @property
    def outcome(self) -> Outcome:
        """`text` as given, and the job the delivery was about, if any."""
        return self.text, self.job_id


@dataclass(frozen=True)
class PostOnce:
    """Comment on the issue unless the App's comment bearing the marker of `key` is there."""

    key: str
    body: str


@dataclass(frozen=True)
class React:
    """React to the issue, or to one of its comments (GitHub keeps one reaction of a kind
    per account: idempotent). 👀 received, 👍 a command taken, 😕 one refused."""

    content: Literal["eyes", "+1", "confused"] = "eyes"
    comment_id: int | None = None  # None: the issue itself


@dataclass(frozen=True)
class StartJob:
    """Start the issue's job, or retry what failed in the one it has (outcome `job N`)."""

    subject: Subject
    project: Project
    brief: str
    project_text: str | None
    issue_body: str = ""  # the issue's text as the job starts from it (sanitized)
    ordinal: int = 1  # the issue's k-th job: one after the earlier ones finished


@dataclass(frozen=True)
class AnswerGate:
    """Record the decider's reply as the answer to a job's gate (`answered gate N`)."""

    job_id: int
    gate_id: int
    text: str
    answered_by: str
    ref: str | None = None  # the answering comment, as the store names it


@dataclass(frozen=True)
class ReviseIssue:
    """The job's issue was edited: record its new text and ask the decider about it."""

    job_id: int
    title: str
    body: str
    by: str
    edited_at: float | None
    before_title: str | None = None  # what GitHub says it read before, where it says
    before_body: str | None = None


@dataclass(frozen=True)
class Advise:
    """Hand an advisor's reply to the agent that asked the gate; the gate stays open."""

    job_id: int
    gate_id: int
    text: str
    advisor: str


@dataclass(frozen=True)
class Reassign:
    """Hand an open gate to another decider, if they have write access (`/decider`)."""

    job_id: int
    gate_id: int
    login: str
    by: str


@dataclass(frozen=True)
class Control:
    """A decider's order to the job: `pause`, `resume`, `status`, `withdraw`, or `steer`
    (with `text`)."""

    job_id: int
    order: str  # status, pause, resume, steer, withdraw, budget, remember, reopen or forget
    text: str
    by: str
    ref: str  # the comment that gave it, as the store names it


@dataclass(frozen=True)
class Override:
    """The decider's correction of an answer the proxy gave alone at a gate."""

    job_id: int
    gate_id: int
    answer: str
    by: str
    ref: str  # the comment that gave it, as the store names it


@dataclass(frozen=True)
class AutoProxy:
    """Let the proxy answer every eligible gate of the job (`teaparty-auto`)."""

    job_id: int
    by: str


@dataclass(frozen=True)
class Later:
    """Decide again in `after_s` seconds: something under way (a question being posted) is
    not recorded yet; the delivery waits without spending an attempt."""

    reason: str
    after_s: float = 5.0


@dataclass(frozen=True)
class EndPull:
    """The job's pull request was merged, closed unmerged, or closed by deleting its branch."""

    job_id: int
    state: Literal["merged", "closed", "gone"]
    by: str


@dataclass(frozen=True)
class SetPull:
    """The job's pull request is open (again) or a draft: a draft holds a running round."""

    job_id: int
    state: Literal["open", "draft"]
    by: str


@dataclass(frozen=True)
class WithdrawJob:
    """Withdraw the job as `/withdraw` does; `why` is what `by` did (`closed the issue`)."""

    job_id: int
    by: str
    why: str


@dataclass(frozen=True)
class LeaveRepos:
    """The App no longer serves `repos` (`owner/name`): withdraw `jobs`, delete their folders."""

    jobs: tuple[int, ...]
    repos: tuple[str, ...]
    by: str


Action = (
    Ignore
    | Report
    | PostOnce
    | React
    | StartJob
    | AnswerGate
    | ReviseIssue
    | Advise
    | Reassign
    | Control
    | Override
    | AutoProxy
    | Later
    | EndPull
    | SetPull
    | WithdrawJob
    | LeaveRepos
)


def job_key(owner: str, repo: str, number: int, ordinal: int = 1) -> str:
    """The key of an issue's first job, `github:owner/repo#N`; of its k-th, `…#N/k`."""
    key = f"github:{owner}/{repo}#{number}"
    return key if ordinal == 1 else f"{key}/{ordinal}"


def job_ordinal(key: str) -> int:
    """Which of its issue's jobs the job of `key` is (1 for `…#N`, k for `…#N/k`)."""
    _, slash, k = key.rpartition("#")[2].partition("/")
    return int(k) if slash and k.isdigit() else 1
