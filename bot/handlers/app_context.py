"""What handlers gather facts through and perform their actions with: GitHub, the Office.

`AppContext.perform` carries out a decision's actions on the delivery's issue, in order, and
answers the delivery's outcome. It adds no decisions of its own: a comment is posted once
by looking for the App's marker first, and a job is started (or, for an issue whose job
exists, its failures retried) the way the action says.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass

from bot.errors import BotError, NotYetError
from bot.github.client import GitHubApp, Installation
from bot.github.forge import find_comment
from bot.github.tracking import clarify_body
from bot.handlers.actions import (
    Action,
    Advise,
    AnswerGate,
    AutoProxy,
    Control,
    Ignore,
    Later,
    Outcome,
    Override,
    PostOnce,
    React,
    Reassign,
    Report,
    ReviseIssue,
    StartJob,
    job_key,
)
from bot.handlers.lifecycle_actions import reopen_pull
from bot.handlers.payload_fields import check_owner, check_repo_name
from bot.handlers.payloads import Repo
from bot.handlers.repos import Repos
from bot.settings import Settings
from orchestrator.api import (
    ControlError,
    GateClosedError,
    IssueText,
    JobDriver,
    JobSource,
    JobStateError,
    NotProxyAnsweredError,
    Office,
    Ports,
    slug,
    withdraw,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class AppContext:
    """The App's GitHub client, the Office, its ports and its job driver, and the
    repositories' cache."""

    settings: Settings
    github: GitHubApp
    office: Office
    ports: Ports
    driver: JobDriver
    repos: Repos

    async def installation(self, repo: Repo) -> Installation:
        """A client acting as the installation the delivery came through."""
        if repo.installation_id is None:
            raise BotError(f"{repo.full_name}: the delivery names no installation")
        return await self.github.installation(repo.installation_id)

    async def perform(self, actions: Sequence[Action], *, repo: Repo, number: int) -> Outcome:
        """Carry out `actions` on issue `number` of `repo`; what came of the delivery."""
        outcome: Outcome = ("nothing to do", None)
        for action in actions:
            match action:
                case Ignore() | Report():
                    outcome = action.outcome
                case PostOnce():
                    await self._post_once(repo, number, action)
                case React():
                    await self._react(repo, number, action)
                case Later():
                    raise NotYetError(action.reason, retry_at=time.time() + action.after_s)
                case _:
                    outcome = await self._act(action, repo, number)
        return outcome

    async def _act(self, action: Action, repo: Repo, number: int) -> Outcome:
        """An action that changes the job: its outcome."""
        match action:
            case StartJob():
                job_id = await self._start(action)
                return f"job {job_id}", job_id
            case AnswerGate():
                return await self._answer(action)
            case Advise():
                return await self._advise(action)
            case Reassign():
                return await self._reassign(repo, number, action)
            case Control():
                return await self._control(repo, number, action)
            case Override():
                return await self._override(repo, number, action)
            case ReviseIssue():
                return await self._revise(action)
            case AutoProxy():
                await self.ports.proxy.set_auto(action.job_id, on=True, by=action.by)
                await self.driver.sync(action.job_id)
                return f"job {action.job_id}: the proxy decides (by {action.by})", action.job_id
        raise AssertionError(f"no way to perform {action!r}")

    async def _answer(self, action: AnswerGate) -> Outcome:
        try:
            gate = await self.office.answer_gate(
                action.gate_id, text=action.text, answered_by=action.answered_by, ref=action.ref
            )
        except GateClosedError as exc:  # a race with the same comment, or another answer
            return f"ignored: {exc}", action.job_id
        return f"answered gate {gate.gate_id}", action.job_id

    async def _revise(self, action: ReviseIssue) -> Outcome:
        """Record the issue's new text; an edit the job does not work to yet is asked about."""
        before = None
        if action.before_title is not None or action.before_body is not None:
            before = IssueText(
                action.title if action.before_title is None else action.before_title,
                action.body if action.before_body is None else action.before_body,
            )
        edited = await self.ports.revisions.edited(
            action.job_id,
            IssueText(action.title, action.body),
            by=action.by,
            edited_at=action.edited_at,
            before=before,
        )
        if edited.outcome in ("asked", "reverted"):
            await self.driver.sync(action.job_id)
        if edited.outcome == "asked":
            return f"issue edited by {action.by}: gate {edited.gate_id}", action.job_id
        return f"issue edited by {action.by}: {edited.outcome}", action.job_id

    async def _react(self, repo: Repo, number: int, action: React) -> None:
        gh = await self.installation(repo)
        if action.comment_id is None:
            await gh.react(repo.owner, repo.name, action.content, number=number)
        else:
            await gh.react(repo.owner, repo.name, action.content, comment_id=action.comment_id)

    async def _advise(self, action: Advise) -> Outcome:
        try:
            await self.office.advise(action.gate_id, text=action.text, advisor=action.advisor)
        except GateClosedError as exc:
            return f"ignored: {exc}", action.job_id
        return f"advice on gate {action.gate_id} from {action.advisor}", action.job_id

    async def _reassign(self, repo: Repo, number: int, action: Reassign) -> Outcome:
        """Hand the gate over if the new decider can write; say which it was."""
        gh = await self.installation(repo)
        if await gh.permission(repo.owner, repo.name, action.login) not in ("admin", "write"):
            key = f"decider-refused:{action.gate_id}:{action.login.lower()}"
            body = (
                f"@{action.by}, @{action.login} has no write access to this repository, so "
                f"question {action.gate_id} stays yours to answer."
            )
            await self._post_once(repo, number, PostOnce(key, clarify_body(key, body)))
            return f"ignored: {action.login} may not decide", action.job_id
        try:
            await self.office.reassign_gate(action.gate_id, decider=action.login)
        except GateClosedError as exc:
            return f"ignored: {exc}", action.job_id
        key = f"decider:{action.gate_id}:{action.login.lower()}"
        body = f"@{action.login}, @{action.by} handed question {action.gate_id} to you to answer."
        await self._post_once(repo, number, PostOnce(key, clarify_body(key, body)))
        return f"gate {action.gate_id} handed to {action.login}", action.job_id

    async def _control(self, repo: Repo, number: int, action: Control) -> Outcome:
        """Carry out a decider's order, then bring the tracking comment in line."""
        orders, job_id = self.ports.orders, action.job_id
        try:
            if action.order == "pause":
                done = "paused" if await orders.pause(job_id, by=action.by) else "already paused"
            elif action.order == "resume":
                done = "resumed" if await orders.resume(job_id) else "was not paused"
            elif action.order == "steer":
                given = await orders.steer(job_id, action.text, by=action.by, ref=action.ref)
                done = "steered" if given else "already steered by this comment"
            elif action.order == "withdraw":
                done = await self.withdraw_job(job_id, by=f"{action.by} (/withdraw)")
            elif action.order == "budget":
                usd = float(action.text)  # the amount, as the decision read it
                gate = await orders.set_budget(job_id, usd, by=action.by, ref=action.ref)
                done = f"budget set to ${usd:.2f}"
                done += f", approving question {gate.gate_id}" if gate is not None else ""
            elif action.order == "reopen":
                done = await reopen_pull(self, job_id)
            elif action.order == "forget":
                forgot = await self.office.forget_learning(job_id, action.text, by=action.by)
                done = f"learning {action.text} " + ("forgotten" if forgot else "already forgotten")
            elif action.order == "remember":
                kept = await self.office.remember(job_id, action.text, by=action.by, ref=action.ref)
                done = "preference kept" if kept else "preference already kept"
            else:
                done = "status shown"
        except (ControlError, JobStateError) as exc:  # ended, or no lead: say so to the asker
            key = f"control:{action.ref}"
            body = f"@{action.by}, `/{action.order}` did nothing: {exc}."
            await self._post_once(repo, number, PostOnce(key, clarify_body(key, body)))
            return f"ignored: {exc}", job_id
        await self.driver.sync(job_id)
        return f"job {job_id} {done} by {action.by}", job_id

    async def _override(self, repo: Repo, number: int, action: Override) -> Outcome:
        """Record the decider's correction of the proxy and tell the asking agent."""
        try:
            await self.ports.proxy.record_override(
                action.gate_id, action.answer, action.by, ref=action.ref
            )
        except NotProxyAnsweredError as exc:
            key = f"control:{action.ref}"
            body = f"@{action.by}, `/override` did nothing: {exc}."
            await self._post_once(repo, number, PostOnce(key, clarify_body(key, body)))
            return f"ignored: {exc}", action.job_id
        await self.driver.sync(action.job_id)
        return f"gate {action.gate_id}: the proxy overridden by {action.by}", action.job_id

    async def withdraw_job(self, job_id: int, *, by: str) -> str:
        """End the job as cancelled and give back its worktrees (its branch stays); `by`
        says who asked and how, for its log. What changed, said short."""
        withdrawn = await withdraw(self.office, job_id, by=by)
        await self.office.close_workspace(job_id)
        return withdrawn.describe().removeprefix(f"job {job_id} ")

    async def _post_once(self, repo: Repo, number: int, action: PostOnce) -> None:
        gh = await self.installation(repo)
        identity = await self.github.identity()
        if await find_comment(gh, identity, repo.owner, repo.name, number, action.key) is None:
            await gh.comment(repo.owner, repo.name, number, action.body, identity=identity)

    async def _start(self, action: StartJob) -> int:
        subject, project = action.subject, action.project
        full = f"{check_owner(subject.owner)}/{check_repo_name(subject.repo)}"  # URL- and path-safe
        name = slug(subject.title) or "job"
        source = JobSource(
            repo=f"github/{full}",
            source=f"{self.settings.server_url.rstrip('/')}/{full}.git",
            start=f"refs/remotes/origin/{subject.default_branch}",
            branch=lambda _: job_branch(subject.number, action.ordinal, name),
            slug=name,
        )
        self.office.add_project(project)
        job = await self.office.start_job(
            project=project.name,
            key=job_key(subject.owner, subject.repo, subject.number, action.ordinal),
            title=subject.title,
            brief=action.brief,
            source=source,
            project_text=action.project_text,
        )
        await self.ports.records.link(job.job_id, "github", subject.to_json())
        started_from = IssueText(subject.title, action.issue_body)
        await self.ports.revisions.started(job.job_id, started_from)  # kept once
        if not job.created and (retried := await self.driver.retry(job.job_id)):
            log.info("job %d: retrying %s", job.job_id, ", ".join(retried))
        return job.job_id


def job_branch(number: int, ordinal: int, name: str) -> str:
    """The branch of issue `number`'s first job (`teaparty/job-N-slug`), or of its k-th
    (`teaparty/job-N-k-slug`): a new job never takes an earlier one's branch."""
    return (
        f"teaparty/job-{number}-{name}"
        if ordinal == 1
        else f"teaparty/job-{number}-{ordinal}-{name}"
    )
