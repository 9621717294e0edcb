"""GitHubForge: the engine's Forge on one issue — tracking comment, gate comments, branch, PR.

It only talks to GitHub: the engine pushes the branch (to `push_target`) and records what
the forge returns (the pull request it opened, where it put a gate's question). Each object
the bot makes on GitHub is recorded in the store (`forge_objects`, through `ForgeObjects`)
under a stable key once made, and looked up by its hidden marker (or its branch, for the
pull request; its commit and `external_id`, for the job's `TeaParty` check run on the pull
request's head: bot/github/job_check.py) before it is made, so a crash between creating and
recording never makes a second one. A lookup accepts only what the App wrote: authored by
its `Identity` (or an id it recorded); anyone can write a marker, so a planted one is never
adopted. What agents wrote is posted through `Outbound`. A rate limit GitHub asks the App to
wait out is a `ForgeWaitError`: the job waits, in the store, and nothing fails.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import replace

from bot.errors import BotError, GitHubError, RateLimitedError
from bot.github.client import Clock, GitHubApp, Identity, Installation, Json
from bot.github.job_check import JobNotes, sync_check
from bot.github.outbound import Outbound
from bot.github.reviews import PullReviews
from bot.github.round_delivery import deliver_round
from bot.github.subject import Subject
from bot.github.tracking import (
    closed_body,
    failure_body,
    gate_body,
    marker,
    proxy_body,
    pull_body,
    remind_body,
    tracking_body,
)
from orchestrator.api import (
    Delivered,
    ForgeError,
    ForgeObjects,
    ForgeWaitError,
    Gate,
    GateKinds,
    GatePosted,
    JobHandle,
    JobStatus,
    ProxyDecision,
    PushTarget,
    ReviewRound,
    RoundLedger,
)

log = logging.getLogger(__name__)
# GitHub's answer when a workflow's GITHUB_TOKEN may not open pull requests, and the fix.
ACTIONS_MAY_NOT_OPEN = "not permitted to create or approve pull requests"
ACTIONS_SETTING = (
    "The repository does not let GitHub Actions open pull requests: an admin allows it in "
    'Settings → Actions → General → Workflow permissions ("Allow GitHub Actions to create '
    "and approve pull requests\"), or gives the workflow a GitHub App's token instead. The "
    "branch is pushed; relabel the issue to retry."
)


def git_credentials(token: str) -> str:
    """The HTTP header that authenticates git (the engine scopes it to the one remote URL)."""
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return f"Authorization: Basic {basic}"


class GitHubForge:
    """The Forge for one job on one GitHub issue."""

    def __init__(
        self,
        app: GitHubApp,
        objects: ForgeObjects,
        subject: Subject,
        *,
        kinds: GateKinds,
        server_url: str,
        identity: Identity,
        progress_interval_s: float = 60.0,
        clock: Clock = time.time,
        pages_url: str | None = None,
        notes: JobNotes | None = None,
    ) -> None:
        self.app = app
        self.pages_url = pages_url  # where `teaparty serve` shows job pages, if it does
        self.objects = objects  # what it made on GitHub, kept in the engine's store
        self.kinds = kinds  # how the engine's own gates are worded
        self.subject = subject
        self.server_url = server_url.rstrip("/")
        self.progress_interval_s = progress_interval_s
        self.clock = clock
        self.identity = identity
        self.notes = notes  # where a note for the tracking comment is kept once (CI's notes)
        self.agent = Outbound(subject.owner, subject.repo, subject.number, self.server_url)

    def remote(self) -> str:
        """The repository's git remote (no credentials in it)."""
        return f"{self.server_url}/{self.subject.owner}/{self.subject.repo}.git"

    async def _gh(self) -> Installation:
        return await self.app.installation(self.subject.installation_id)

    async def show(self, status: JobStatus) -> None:
        """Create the tracking comment once, then edit it when what it says changes."""
        with _waits():
            await self._show(status)

    async def _show(self, status: JobStatus) -> None:
        if status.link is None and (pull := await self._known(status.job_id, "pull")):
            status = replace(status, link=pull[0])
        if (note := await sync_check(self, status)) is not None:
            status = replace(status, ci=(note, *status.ci))
        body = tracking_body(
            status,
            branch_url=self._branch_url(status.branch),
            trigger_label=self.subject.trigger_label,
            agent=self.agent,
            page_url=f"{self.pages_url}/jobs/{status.job_id}" if self.pages_url else None,
        )
        key = "tracking"
        known = await self._known(status.job_id, key)
        phase, headline = _headline(status)
        digest = f"{phase}:{headline}"
        if known is not None:
            comment_id, old_digest, updated_at = known
            if old_digest == digest:
                return  # only the step, the tokens or the cost moved: shown with the next edit
            # The phase holds colons itself (`rounds:N`); the headline after the last is hex.
            progress_only = old_digest.rsplit(":", 1)[0] == phase
            if progress_only and self.clock() - updated_at < self.progress_interval_s:
                return  # coalesced: a later sync (or the next phase) shows it
            gh = await self._gh()
            await gh.edit_comment(self.subject.owner, self.subject.repo, int(comment_id), body)
            await self._record(status.job_id, key, comment_id, digest)
            return
        await self._post_once(status.job_id, key, f"job:{status.job_id}", body, digest=digest)

    async def ask(
        self, status: JobStatus, gate: Gate, *, suggestion: ProxyDecision | None = None
    ) -> GatePosted:
        """Post a gate's question as its own comment, once (with the proxy's suggestion);
        the comment, and its decider."""
        with _waits():
            return await self._ask(status, gate, suggestion)

    async def _ask(
        self, status: JobStatus, gate: Gate, suggestion: ProxyDecision | None
    ) -> GatePosted:
        key = f"gate:{gate.gate_id}"
        known = await self._known(status.job_id, key)
        body = gate_body(
            gate,
            decider=self.subject.decider,
            agent=self.agent,
            suggestion=suggestion,
            kinds=self.kinds,
        )
        if known is None:
            comment_id = await self._post_once(status.job_id, key, key, body)
        else:
            comment_id = known[0]
            if known[1] != _digest(body):  # what it asks changed: the engine restated it
                gh = await self._gh()
                s = self.subject
                await gh.edit_comment(s.owner, s.repo, int(comment_id), body)
                await self._record(status.job_id, key, comment_id, _digest(body))
        return GatePosted(comment_id, self.subject.decider)

    async def remind(self, status: JobStatus, gate: Gate, *, days: float) -> None:
        """Remind the decider of a question open for `days`, once."""
        key = f"remind:{gate.gate_id}"
        with _waits():
            if await self._known(status.job_id, key) is None:
                decider = gate.decider or self.subject.decider
                body = remind_body(key, gate, decider=decider, days=days)
                await self._post_once(status.job_id, key, key, body)

    async def close_idle(self, status: JobStatus, gate: Gate, *, days: float) -> None:
        """Say once that the job closed for want of an answer, and how to resume it."""
        key = f"closed:{gate.gate_id}"
        with _waits():
            await self._show(status)
            if await self._known(status.job_id, key) is None:
                decider = gate.decider or self.subject.decider
                body = closed_body(key, gate, decider=decider, days=days)
                await self._post_once(status.job_id, key, key, body)

    async def proxy_answered(self, status: JobStatus, gate: Gate, decision: ProxyDecision) -> None:
        """Post, once, the comment that says the proxy answered a gate, and how to override
        (the driver calls this once per answer, again only after a crash: then it is found)."""
        key = f"proxy:{gate.gate_id}"
        body = proxy_body(gate, decision, decider=self.subject.decider, agent=self.agent)
        with _waits():
            await self._post_once(status.job_id, key, key, body)

    async def fail(self, status: JobStatus, error: str) -> None:
        """Update the tracking comment and say once per distinct error what failed."""
        with _waits():
            await self._fail(status, error)

    async def _fail(self, status: JobStatus, error: str) -> None:
        await self._show(status)
        key = f"failure:{_digest(error)[:12]}"
        if await self._known(status.job_id, key) is None:
            body = failure_body(
                status, error, key=key, trigger_label=self.subject.trigger_label, agent=self.agent
            )
            await self._post_once(status.job_id, key, key, body)

    async def credentials(self) -> str:
        """The header git sends to the repository: a fresh installation token's."""
        with _waits():
            return git_credentials(await self.app.token(self.subject.installation_id))

    async def push_target(self, job: JobHandle) -> PushTarget:
        """The repository, with a fresh installation token's header for git."""
        with _forge_errors():
            return PushTarget(self.remote(), auth=await self.credentials())

    async def deliver(self, status: JobStatus, job: JobHandle) -> Delivered:
        """Open the pull request of the job branch the engine pushed, or update the open one;
        its link and number."""
        with _forge_errors():
            return await self._deliver(status, job)

    async def open_draft(self, status: JobStatus, job: JobHandle) -> Delivered:
        """Open the job branch's pull request as a draft (the project's early draft), or
        find the App's open one; its link and number."""
        with _forge_errors():
            return await self._deliver(status, job, draft=True)

    async def draft_pushed(self, status: JobStatus, head: str) -> None:
        """The draft's branch moved to `head`: the job's check run moves with it."""
        with _forge_errors():
            await sync_check(self, status, head=head)

    async def close_draft(self, status: JobStatus, number: int, why: str) -> None:
        """Close the job's draft pull request unmerged, its body led by `why`."""
        s = self.subject
        note = f"**Closed by TeaParty:** {self.agent.inline(why)} The branch keeps the work."
        body = f"{note}\n\n{pull_body(status, agent=self.agent)}"
        with _forge_errors():
            await (await self._gh()).close_pull(s.owner, s.repo, number, body=body)

    async def mark_ready(self, status: JobStatus, number: int) -> None:
        """Mark the job's draft pull request ready for review (nothing if it is ready)."""
        s = self.subject
        with _forge_errors():
            await PullReviews(await self._gh()).mark_ready(s.owner, s.repo, number)

    async def _deliver(
        self, status: JobStatus, job: JobHandle, *, draft: bool = False
    ) -> Delivered:
        gh = await self._gh()
        suffix = f" (#{self.subject.number})"
        title = self.agent.inline(self.subject.title, limit=250 - len(suffix)) + suffix
        body = pull_body(status, agent=self.agent)
        pull = await self._open_pull(gh, job.space.branch, title=title, body=body, draft=draft)
        await self._record(status.job_id, "pull", str(pull["html_url"]), _digest(body))
        await sync_check(self, status, head=str(pull["head"]["sha"]))
        return Delivered(str(pull["html_url"]), int(pull["number"]))

    async def deliver_round(
        self, status: JobStatus, job: JobHandle, review: ReviewRound, ledger: RoundLedger
    ) -> str | None:
        """Have a review round pushed once, answer its threads, summarise it
        (round_delivery.py)."""
        with _forge_errors():
            head = await deliver_round(self, status, review, ledger)
            if head is not None:  # the round's check run moves to the commit it pushed
                await sync_check(self, status, head=head)
            return head

    async def _open_pull(
        self, gh: Installation, branch: str, *, title: str, body: str, draft: bool = False
    ) -> Json:
        """Open the pull request (a draft with `draft`); if the App's is open already (a
        retry, a later round, the early draft), bring its title and body up to date instead."""
        s = self.subject
        try:
            return await gh.create_pull(
                s.owner,
                s.repo,
                title=title,
                head=branch,
                base=s.default_branch,
                body=body,
                identity=self.identity,
                draft=draft,
            )
        except GitHubError as exc:
            if exc.status == 403 and ACTIONS_MAY_NOT_OPEN in str(exc):
                raise GitHubError(f"{exc} {ACTIONS_SETTING}", status=exc.status) from exc
            if exc.status != 422 or "already exists" not in str(exc):
                raise
            pull = await find_pull(gh, self.identity, s.owner, s.repo, branch)
            if pull is None:  # someone else's pull request from our branch is not adopted
                raise
            if (pull.get("title"), pull.get("body")) == (title, body):
                return pull
            return await gh.update_pull(
                s.owner, s.repo, int(pull["number"]), title=title, body=body
            )

    async def _post_once(
        self, job_id: int, key: str, marker_key: str, body: str, *, digest: str | None = None
    ) -> str:
        """Find the App's comment bearing the marker, or post it; record it either way."""
        gh = await self._gh()
        s = self.subject
        recorded = await self._recorded(job_id)
        found = await find_comment(
            gh, self.identity, s.owner, s.repo, s.number, marker_key, recorded=recorded
        )
        if found is not None:
            comment_id = str(found["id"])
            if str(found.get("body")) != body:
                await gh.edit_comment(s.owner, s.repo, int(comment_id), body)
        else:
            posted = await gh.comment(s.owner, s.repo, s.number, body, identity=self.identity)
            comment_id = str(posted["id"])
        await self._record(job_id, key, comment_id, digest or _digest(body))
        return comment_id

    async def _known(self, job_id: int, key: str) -> tuple[str, str, float] | None:
        found = await self.objects.forge_object(job_id, key)
        return None if found is None else (found.external_id, found.digest, found.updated_at)

    async def _recorded(self, job_id: int) -> frozenset[str]:
        return await self.objects.forge_object_ids(job_id)

    async def _record(self, job_id: int, key: str, external_id: str, digest: str) -> None:
        await self.objects.record_forge_object(job_id, key, external_id, digest, at=self.clock())

    def _branch_url(self, branch: str) -> str | None:
        if not branch or not self.server_url.startswith("http"):
            return None
        return f"{self.server_url}/{self.subject.owner}/{self.subject.repo}/tree/{branch}"


async def find_comment(
    gh: Installation,
    identity: Identity,
    owner: str,
    repo: str,
    number: int,
    key: str,
    *,
    recorded: frozenset[str] = frozenset(),
) -> Json | None:
    """The App's comment on an issue bearing the marker of `key`, or None (see
    `Installation.find_comment`: a marker in anyone else's comment is not adopted)."""
    return await gh.find_comment(owner, repo, number, marker(key), identity, recorded=recorded)


async def find_pull(
    gh: Installation, identity: Identity, owner: str, repo: str, branch: str
) -> Json | None:
    """The open pull request the App opened from `branch` of `owner/repo`, or None."""
    return await gh.find_pull(owner, repo, branch, identity)


def _headline(status: JobStatus) -> tuple[str, str]:
    """What makes the tracking comment change: its phase (shown at once) and the rest of
    what a reader acts on (shown at most once per progress interval). The step, the branch,
    the tokens and the cost are not in it: they ride along with the next edit, so how many
    edits a job costs does not grow with how long its model takes."""
    tasks = status.tasks
    finished = bool(tasks) and all(t.state in ("done", "blocked", "cancelled") for t in tasks)
    phase = "/".join(
        [
            status.state,
            "finished" if finished else "open",
            "waiting" if status.waiting else "",
            "linked" if status.link else "",
            "paused" if status.paused_by else "",
            f"rounds:{len(status.rounds)}",
            status.pull or "",
            # what CI did (a round, a flaky check, a failure held for a person) is shown at once
            f"ci:{_digest(json.dumps(status.ci))[:8]}" if status.ci else "",
        ]
    )
    rest = json.dumps(
        [
            [(t.number, t.title, t.state in ("done", "blocked"), t.blocked_reason) for t in tasks],
            status.link,
            status.error,
            status.waiting,
            status.steering,
            status.rounds,
            status.budget_note,
            status.result if status.state in ("delivering", "done") else None,
        ]
    )
    return phase, _digest(rest)[:32]


@contextlib.contextmanager
def _waits() -> Iterator[None]:
    """GitHub's rate limit, as the engine's wait: until its reset, nothing failed."""
    try:
        yield
    except RateLimitedError as exc:
        raise ForgeWaitError(f"waiting for GitHub: {exc}", retry_at=exc.retry_at) from None


@contextlib.contextmanager
def _forge_errors() -> Iterator[None]:
    """What failed on GitHub, as the engine's ForgeError (a rate limit: its wait)."""
    try:
        with _waits():
            yield
    except BotError as exc:
        raise ForgeError(str(exc)) from exc


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
