"""The job's `TeaParty` check run on its pull request's head: its summary where people look
first, moving with the job (queued while it plans or is held, in progress while it works,
completed when it ends) and with each review round.

Check runs belong to a commit, as on GitHub: the forge learns the pull request's head when it
opens the pull request and when a round pushes (`sync_check(head=...)`), and keeps it in the
store. Each round gets its own run on the head it starts from (a round on the same head is a
new run of the same name, as a re-run is; the newer shows on the pull request), and a round
that pushes moves to a new run on the new head, completing the one it leaves as `neutral`. A
completed run is never put back in progress: a job that works again gets a new run.

What was made is recorded (`forge_objects`, key `check`: the run's id, and its commit, round,
generation and state), so a restart updates it; before a run is made it is looked for on its
commit by name, App and `external_id`, so a crash between creating and recording, or a 5xx
on the create, never makes two. Until the installation accepts `checks: write` (403), the
job goes on without it; the tracking comment says so once (the CI notes' `note`), and each
later head or round asks again.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from bot.errors import GitHubError, RateLimitedError
from bot.github.check_runs import CheckRuns, fit
from bot.github.ci import refused
from bot.github.client import Json
from bot.github.job_summary import summary_lines
from bot.github.outbound import Outbound
from bot.github.round_delivery import GitHubForge as OnGitHub
from orchestrator.api import ForgeObjects, JobStatus

log = logging.getLogger(__name__)
CHECK_NAME = "TeaParty"
KEY, HEAD_KEY = "check", "check-head"
JOB_CHECK_ID = "teaparty:job:"  # how the job's check runs' `external_id` begins
REFUSED = "refused"  # the run's id, recorded while the installation refuses `checks: write`
Status = Literal["queued", "in_progress", "completed"]


class JobNotes(Protocol):
    """Where the tracking comment's notes are kept (the engine's CI notes), said once."""

    async def note(self, job_id: int, sha: str, key: str, note: str) -> bool:
        """Keep `note` under `key`; whether it is new."""
        ...


class CheckForge(OnGitHub, Protocol):
    """What the check run needs of the job's forge (bot/github/forge.py's): GitHub, the
    issue and how the App writes there (as a round's delivery needs), and more."""

    @property
    def objects(self) -> ForgeObjects:
        """What the forge made on GitHub, kept in the engine's store."""
        ...

    @property
    def pages_url(self) -> str | None:
        """Where `teaparty serve` shows job pages (`/jobs/{id}` below it), if it does."""
        ...

    @property
    def progress_interval_s(self) -> float:
        """How often progress alone (no change of phase) may update the run."""
        ...

    @property
    def notes(self) -> JobNotes | None:
        """Where a note for the tracking comment is kept (None: nowhere)."""
        ...

    def clock(self) -> float:
        """Now, in epoch seconds."""
        ...


@dataclass(frozen=True)
class Made:
    """The check run recorded for the job: its commit, round, generation, phase (status and
    conclusion), what it last said, and when."""

    run_id: str
    sha: str
    round: int
    gen: int
    phase: str
    content: str
    at: float = 0.0

    @property
    def done(self) -> bool:
        """Whether it was completed (it is not put back in progress)."""
        return self.phase.startswith("completed")

    def digest(self) -> str:
        """As kept in the store."""
        return json.dumps([self.sha, self.round, self.gen, self.phase, self.content])

    @classmethod
    def of(cls, run_id: str, digest: str, at: float) -> Made | None:
        """What the store kept (None: not a check run's record)."""
        try:
            sha, number, gen, phase, content = json.loads(digest)
        except ValueError:
            return None
        return cls(run_id, str(sha), int(number), int(gen), str(phase), str(content), at)


def check_state(status: JobStatus) -> tuple[Status, str | None]:
    """The check run's status and conclusion for the job as it stands."""
    if status.state == "done":
        head = next((c for c in reversed(status.checks) if c.task is None), None)
        verdict = head.checked.status if head is not None else "not run"
        return "completed", {"passed": "success", "failed": "failure"}.get(verdict, "neutral")
    if status.state == "failed":
        return "completed", "failure"
    if status.state == "cancelled":
        return "completed", "cancelled"
    if status.state == "planning" or status.paused_by:
        return "queued", None
    return "in_progress", None


def check_title(status: JobStatus, conclusion: str | None) -> str:
    """The check run's one-line title."""
    done = sum(t.state == "done" for t in status.tasks)
    tasks = f"{done}/{len(status.tasks)} tasks" if status.tasks else "no tasks yet"
    said = {
        "success": "done, checks passed",
        "failure": "failed" if status.state == "failed" else "done, checks failed",
        "neutral": "done, nothing checked",
        "cancelled": "cancelled",
    }.get(conclusion or "", status.state)
    rounds = f", round {len(status.rounds)}" if status.rounds else ""
    return f"Job {status.job_id}: {said}{rounds} ({tasks}, ${status.cost_usd:.2f})"


def check_output(status: JobStatus, *, agent: Outbound, page_url: str | None) -> Json:
    """The check run's `output`: title and the job's summary, within GitHub's limit."""
    summary = "\n".join(summary_lines(status, agent=agent, page_url=page_url))
    _, conclusion = check_state(status)
    return {"title": check_title(status, conclusion), "summary": fit(summary)}


async def sync_check(
    forge: CheckForge, status: JobStatus, *, head: str | None = None
) -> str | None:
    """Bring the job's check run in line with `status`, on `head` when the forge just learned
    the pull request's head, else on the head it keeps; the note for the tracking comment it
    added, if it did (the installation refused the check run). Another failure on GitHub is
    logged and tried again with the next sync: the check is no part of the job's work."""
    job_id = status.job_id
    objects = forge.objects
    if head is not None:
        await objects.record_forge_object(job_id, HEAD_KEY, head, "", at=forge.clock())
    else:
        kept = await objects.forge_object(job_id, HEAD_KEY)
        if kept is None:
            return None  # no pull request yet: no commit to put a check on
        head = kept.external_id
    found = await objects.forge_object(job_id, KEY)
    made = None if found is None else Made.of(found.external_id, found.digest, found.updated_at)
    try:
        return await _sync(forge, status, head, made)
    except RateLimitedError:
        raise  # the forge's wait: the job waits for GitHub's reset
    except GitHubError as exc:
        log.warning("job %d: check run not brought up to date: %s", job_id, exc)
        return None


async def _sync(forge: CheckForge, status: JobStatus, sha: str, made: Made | None) -> str | None:
    state, conclusion = check_state(status)
    page = f"{forge.pages_url}/jobs/{status.job_id}" if forge.pages_url else None
    output = check_output(status, agent=forge.agent, page_url=page)
    phase = f"{state}/{conclusion or ''}"
    now = Made("", sha, len(status.rounds), 0, phase, _digest(json.dumps([phase, output])))
    same = made is not None and (made.sha, made.round) == (now.sha, now.round)
    if made is not None and same:
        if made.run_id == REFUSED or made.content == now.content:
            return None  # a refused head and round is asked again on the next one
        recent = forge.clock() - made.at < forge.progress_interval_s
        if made.phase == now.phase and recent:
            return None  # progress alone: shown with the next change, as the comment does
    body: Json = {"status": state, "output": output}
    if conclusion is not None:
        body["conclusion"] = conclusion
    if page:
        body["details_url"] = page
    try:
        run_id, gen = await _make(forge, status, body, made if same else None, now, made)
    except GitHubError as exc:
        if exc.status != 403:
            raise
        log.warning("job %d: no check run (%s)", status.job_id, exc)
        await _keep(forge, status, replace(now, run_id=REFUSED, phase="", content=""))
        return await _say_refused(forge, status)
    await _keep(forge, status, replace(now, run_id=run_id, gen=gen))
    return None


async def _make(
    forge: CheckForge,
    status: JobStatus,
    body: Json,
    same: Made | None,
    now: Made,
    before: Made | None,
) -> tuple[str, int]:
    """Update the run of this head and round, or make a new one (completing the one the job
    leaves); the run's id and generation."""
    runs = await _runs(forge)
    if same is not None and not (same.done and not now.done):
        await runs.update(int(same.run_id), body)
        return same.run_id, same.gen
    if before is not None and before.run_id != REFUSED and not before.done:
        await runs.update(int(before.run_id), _left(before, now.sha))
    gen = same.gen + 1 if same is not None else 0
    external_id = f"{JOB_CHECK_ID}{status.job_id}:round:{now.round}:{gen}"
    run_id = await _create(runs, body | {"name": CHECK_NAME, "head_sha": now.sha}, external_id)
    return run_id, gen


async def _create(runs: CheckRuns, body: Json, external_id: str) -> str:
    """The run bearing `external_id` on its commit, made unless it is there already."""
    body = body | {"external_id": external_id}
    sha, name = str(body["head_sha"]), str(body["name"])
    found = await runs.find(sha, name=name, external_id=external_id)
    if found is not None:  # made before a crash kept its id: brought up to date instead
        await runs.update(int(found["id"]), {k: v for k, v in body.items() if k != "head_sha"})
        return str(found["id"])
    return str((await runs.create(body))["id"])


def _left(made: Made, sha: str) -> Json:
    """A run's last update once the job moved on to another commit or round."""
    said = f"the job moved on to commit {sha[:12]}" if sha != made.sha else "a new round began"
    return {
        "conclusion": "neutral",
        "output": {"title": "Superseded", "summary": f"Superseded: {said}."},
    }


async def _runs(forge: CheckForge) -> CheckRuns:
    s = forge.subject
    gh = await forge.app.installation(s.installation_id)
    return CheckRuns(gh, s.owner, s.repo, app_id=forge.identity.app_id)


async def _keep(forge: CheckForge, status: JobStatus, made: Made) -> None:
    await forge.objects.record_forge_object(
        status.job_id, KEY, made.run_id, made.digest(), at=forge.clock()
    )


CHECK_REFUSED = (
    "the job's `TeaParty` check run (its summary on the pull request) could not be made, so "
    "the job runs without it"
)


async def _say_refused(forge: CheckForge, status: JobStatus) -> str | None:
    """Say once on the tracking comment why the pull request has no check run; the note,
    when it is new."""
    if forge.notes is None:
        return None
    note = refused("checks: write", need=CHECK_REFUSED)
    fresh = await forge.notes.note(status.job_id, "", "refused:check-run", note)
    return note if fresh else None


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]
