"""`teaparty action`: one GitHub Actions event, applied by the same engine as `teaparty serve`.

The run reads the event GitHub Actions gives it (`GITHUB_EVENT_NAME`, `GITHUB_EVENT_PATH`),
stores it as a delivery (its id is the workflow run's, so a re-run of the same run is the
same delivery) together with what was said on GitHub since the last run read it (comments
and reviews on live jobs' issues and pull requests: what a run that never started, or was
cancelled, would have brought; a comment or review stored once whichever way it came), and
hands them, oldest first, to the App's own handlers (`GitHubService.handle`, the same
code path below event parsing as a webhook). Then it drives every job of the store that
has work — the one the event touched, and any other the event woke — until each parks (a
question, a review, a rate limit) or ends, or the run's deadline passes (a delivery due
within five minutes, such as lone review comments being gathered, is waited for). Past the
deadline no conversation starts a model or tool call; if a job could still go on, the run
dispatches its own continuation. Then it writes the run's summary (`GITHUB_STEP_SUMMARY`)
and exits.

It acts with `GITHUB_TOKEN` (its comments are `github-actions[bot]`'s), or as a GitHub App
when `GITHUB_APP_ID` and a private key are given (the App's installation on the repository,
looked up once). The state the App keeps in its store is the caller's to load and save
(bot/runner/state.py keeps it on a git ref between runs).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

import httpx

from bot.errors import SettingsError
from bot.github.client import Clock, GitHubApp, Identity, Json, github_time
from bot.github.forge import git_credentials
from bot.github.outbound import Outbound
from bot.runner.env import CONTINUATION, MARGIN_S, ActionEnv
from bot.runner.summary import Transcripts, jobs_summary, read_transcripts
from bot.server.backfill import Backfill
from bot.server.runtime import Runtime
from bot.server.webhooks import subject_of
from bot.server.worker import DeliveryWorker
from bot.settings import Settings
from orchestrator.api import (
    AgentDef,
    Arrival,
    Deadline,
    DeliveryRecord,
    JobStatus,
    KnownSecrets,
    Model,
    Sandbox,
    redactor,
)

log = logging.getLogger(__name__)
WAIT_CAP_S = 300.0  # a delivery due sooner is waited for; a later one waits for the next run
RUNNER_INSTALLATION = 0  # GITHUB_TOKEN belongs to no installation the App can name


class TokenApp(GitHubApp):
    """GitHubApp's calls made with one token (GITHUB_TOKEN) for every installation."""

    def __init__(
        self,
        token: str,
        identity: Identity,
        *,
        api_url: str,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Clock = time.time,
        write_interval_s: float = 1.0,
    ) -> None:
        super().__init__(
            app_id="0",  # never used: a token run calls no App endpoint
            private_key="",
            api_url=api_url,
            transport=transport,
            clock=clock,
            write_interval_s=write_interval_s,
        )
        self._fixed = token
        self._identity = identity

    async def identity(self) -> Identity:
        """Who the token writes as."""
        assert self._identity is not None
        return self._identity

    async def token(self, installation_id: int) -> str:
        """The run's token, whatever installation is asked for."""
        return self._fixed


@dataclass(frozen=True)
class ActionRun:
    """What one run did: the event's outcome, and each driven job as it ended the run."""

    outcome: str
    jobs: tuple[JobStatus, ...]
    parked_for_time: bool = False
    continued: str | None = None  # the continuation dispatched (workflow@ref), if any
    api: str = ""  # the GitHub API requests the run made, and what its token has left
    work_left: bool = False  # parked for time with work a run could do now
    transcripts: Transcripts = field(default_factory=dict)  # of the jobs whose project shows them


async def run_action(
    env: ActionEnv,
    *,
    models: Callable[[AgentDef], Model],
    scripted: bool = False,
    sandbox: Sandbox | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    clock: Clock = time.time,
    preserve: tuple[str, str | None] | None = None,
) -> ActionRun:
    """Apply the run's event to the store under `env.home` and drive the jobs with work;
    with `preserve` (a remote and its auth header), every active job's unpublished work is
    pushed to its preserved refs before the store is closed, for the next run's machine."""
    started = clock()
    payload = json.loads(env.event_path.read_bytes())
    if not isinstance(payload, dict):
        raise SettingsError(f"{env.event_path}: the event is not a JSON object")
    settings = Settings(
        app_id=env.app_id or "actions",
        private_key=env.private_key,
        webhook_secret="",
        home=env.home,
        api_url=env.api_url,
        server_url=env.server_url,
        write_interval_s=1.0,
        progress_interval_s=0.0,  # a run is short: what it leaves must show before it ends
        setup_secrets=env.setup_secrets,
    )
    github = None
    if not env.app_mode:
        identity = Identity(env.bot_login, env.bot_app_id)
        github = TokenApp(
            env.token, identity, api_url=env.api_url, transport=transport, clock=clock
        )
    runtime = await Runtime.open(
        settings,
        models=models,
        env=env.engine_env,
        scripted=scripted,
        sandbox=sandbox,
        transport=transport,
        clock=clock,
        github=github,
        secrets=KnownSecrets.of(env.environ, setup=env.setup_secrets),
    )
    runtime.hold_syncs()  # drive() syncs the jobs, one at a time, in this run's order
    try:
        installation = await _installation(runtime, env)
        await runtime.resume()
        arrival = None
        if env.event_name != CONTINUATION:
            if env.app_mode or "installation" not in payload:  # the App's own, in App mode
                payload["installation"] = {"id": installation}
            action = str(payload.get("action") or "")
            body = json.dumps(payload).encode()
            subject = subject_of(env.event_name, payload)
            arrival = Arrival(f"actions-{env.run_id}", env.event_name, action, body, subject)
        backfill = Backfill(
            runtime.github,
            runtime.office,
            runtime.ports,
            runtime.service.context.repos,
            clock=clock,
        )
        fresh = await _reconcile(
            runtime, backfill, env, arrival, payload, installation=installation, clock=clock
        )
        deadline = Deadline(started + env.timeout_s - MARGIN_S, clock)
        log.info(
            "the run works until %s: its time limit less %.0f s, for what is under way to end",
            datetime.fromtimestamp(deadline.at, UTC).isoformat(timespec="milliseconds"),
            MARGIN_S,
        )
        outcome, jobs, timed_out = await _work(runtime, arrival, fresh, deadline)
        if not env.app_mode:
            await _say_no_ci(runtime, jobs)
        if preserve is not None:
            await runtime.office.preserve_all(preserve[0], auth=preserve[1])
        continued = None
        left = timed_out and await _work_left(runtime, jobs)
        if left:
            default = str((payload.get("repository") or {}).get("default_branch") or "")
            continued = await _continue(runtime, env, installation, default=default)
        shown = await _transcripts_shown(runtime, jobs)
        return ActionRun(
            outcome,
            jobs,
            timed_out,
            continued,
            _api_use(runtime.github),
            left,
            await read_transcripts(env.home, shown) if shown else {},
        )
    finally:
        await runtime.close()


async def _work(
    runtime: Runtime, arrival: Arrival | None, fresh: bool, deadline: Deadline
) -> tuple[str, tuple[JobStatus, ...], bool]:
    """Handle the stored deliveries and drive the jobs, waiting in the run for a delivery due
    soon (a gathering window); the event's outcome, each job's status, and whether the
    deadline stopped the run."""
    touched: set[int] = set()
    worker = DeliveryWorker(runtime.ports.deliveries, runtime.service.handle, on_job=touched.add)
    outcome = "a continuation of the runs before it"
    if arrival is not None and not fresh:
        outcome = "handled already: an earlier run read it from GitHub"
    while True:
        await worker.drain()
        if arrival is not None and fresh:
            outcome = _outcome(await runtime.ports.deliveries.get(arrival.delivery_id))
        jobs, timed_out = await drive(runtime, touched, deadline=deadline)
        wait = await _wait_for(runtime, deadline)
        if timed_out or wait is None:
            return outcome, jobs, timed_out
        log.info("a delivery is due in %.0f s (gathering comments): waiting for it", wait)
        await asyncio.sleep(wait)


async def _reconcile(
    runtime: Runtime,
    backfill: Backfill,
    env: ActionEnv,
    arrival: Arrival | None,
    payload: Json,
    *,
    installation: int,
    clock: Clock,
) -> bool:
    """Store the run's event with what was said on GitHub since the last run read it (what
    runs that never started would have brought: comments, reviews, merges, labels), oldest
    first; whether the event is new.

    The first read of a state (no read mark yet) reads only the replies to parked questions."""
    scope = f"github/{env.owner}/{env.repo}"
    read_at = clock()
    since = await runtime.ports.deliveries.read_mark(scope)
    earlier: list[Arrival] = []
    later: list[Arrival] = []
    if since is None:
        await backfill.answers()
    else:
        own_at = _said_at(payload, default=read_at)
        said = await backfill.activity(since=since)
        repository = payload.get("repository")
        if isinstance(repository, dict):  # labels whose runs never started: jobs not begun
            own_issue = (payload.get("issue") or {}).get("number")
            skip = own_issue if env.event_name == "issues" else None
            said += await backfill.labels_in(installation, repository, since=since, skip=skip)
        own = arrival.subject if arrival is not None else None
        for found in sorted(said, key=lambda f: f.at):
            if own is None or found.arrival.subject != own:
                (earlier if found.at <= own_at else later).append(found.arrival)
    ordered = [*earlier, *([arrival] if arrival else []), *later]
    stored = set(await backfill.store(ordered)) if ordered else set()
    if len(stored) > (arrival is not None and arrival.delivery_id in stored):
        log.info("%d event(s) read from GitHub that no run brought", len(stored))
    if backfill.unread:  # the next run reads again from the old mark: nothing is passed by
        log.warning("not read this run: %s; the next run reads them", ", ".join(backfill.unread))
    else:
        await runtime.ports.deliveries.set_read_mark(scope, read_at)
    return arrival is not None and arrival.delivery_id in stored


def _said_at(payload: Json, *, default: float) -> float:
    """When the event's comment or review was written, as GitHub says."""
    for path, stamp in (("comment", "created_at"), ("review", "submitted_at")):
        obj = payload.get(path)
        if isinstance(obj, dict) and obj.get(stamp):
            return github_time(obj[stamp]) or default
    return default


def _outcome(record: DeliveryRecord | None) -> str:
    if record is None or record.outcome:
        return record.outcome if record and record.outcome else "nothing to do"
    if record.state == "pending":  # a gathering window or a rate limit past this run
        return f"waits for a later run ({record.error or 'not due yet'})"
    return f"failed: {record.error}" if record.state == "failed" else "nothing to do"


async def _wait_for(runtime: Runtime, deadline: Deadline) -> float | None:
    """How long until the next pending delivery is due, when this run should wait for it (a
    gathering window, a short backoff); None when none is, or not before the run must end."""
    due = await runtime.ports.deliveries.next_due_at()
    if due is None:
        return None
    wait = max(0.0, due - time.time())  # the queue keeps wall-clock times
    if wait > WAIT_CAP_S or wait >= deadline.left():
        return None
    return wait


async def drive(
    runtime: Runtime, touched: set[int], *, deadline: Deadline
) -> tuple[tuple[JobStatus, ...], bool]:
    """Sync and run every active job (and those the event touched) until none has work left
    this run can do, or the deadline passes (from then on no conversation starts a model or
    tool call); each job's status at the end, and whether the deadline stopped it."""
    office, driver = runtime.office, runtime.service.driver
    jobs = sorted(touched | {job.job_id for job in await runtime.ports.records.linked("github")})
    while True:
        for job_id in jobs:
            await driver.sync(job_id)
        if deadline.passed():
            break
        busy = [job_id for job_id in jobs if await office.busy(job_id)]
        if not busy:
            break
        await office.run_until_idle(deadline=deadline)
    statuses = tuple([await driver.status(job_id) for job_id in jobs])
    return statuses, deadline.passed()


NO_CI = (
    "⚠️ CI does not run on this job's pushes: they are made with GITHUB_TOKEN, and GitHub "
    "starts no workflow for a push or pull request made with it (its guard against loops), "
    "so no failing check can start a round. To have CI run, let TeaParty act as a GitHub App "
    "of yours (the TEAPARTY_APP_ID and TEAPARTY_APP_PRIVATE_KEY secrets) or with a personal "
    "access token."
)


async def _say_no_ci(runtime: Runtime, jobs: tuple[JobStatus, ...]) -> None:
    """With GITHUB_TOKEN, say once on each job with a pull request that CI cannot run on it."""
    for status in jobs:
        if await runtime.ports.reviews.pull(status.job_id) is None:
            continue
        if await runtime.ports.ci.note(status.job_id, "", "token", NO_CI):
            await runtime.service.driver.sync(status.job_id)


async def _work_left(runtime: Runtime, jobs: tuple[JobStatus, ...]) -> bool:
    """Whether a run started now would have work: a job with a conversation that can go on,
    or a delivery due within the wait a run makes for one. A job that waits on a person (an
    answer, a resume, a retry) gives a continuation nothing to do: the run that person's
    reply brings goes on."""
    for status in jobs:
        if await runtime.office.busy(status.job_id):
            return True
    due = await runtime.ports.deliveries.next_due_at()
    return due is not None and due - time.time() <= WAIT_CAP_S


async def _continue(
    runtime: Runtime, env: ActionEnv, installation: int, *, default: str
) -> str | None:
    """Start this workflow again (workflow_dispatch) to carry on where this run parked;
    what was dispatched, or None when the run does not know its workflow. A run of a pull
    request event has the pull request's merge ref, from which nothing can be dispatched:
    its continuation runs on the default branch."""
    target = continuation_target(env.workflow_ref, default=default)
    if target is None:
        log.warning("no continuation: GITHUB_WORKFLOW_REF %r names no workflow", env.workflow_ref)
        return None
    workflow, ref = target
    gh = await runtime.github.installation(installation)
    await gh.dispatch_workflow(env.owner, env.repo, workflow, ref=ref)
    return f"{workflow}@{ref}"


def continuation_target(workflow_ref: str, *, default: str) -> tuple[str, str] | None:
    """The workflow file and ref a continuation is dispatched on, from GITHUB_WORKFLOW_REF
    (`owner/repo/.github/workflows/f.yml@refs/heads/main`); a pull request's merge ref gives
    way to the default branch. None when it names no workflow."""
    path, _, ref = workflow_ref.partition("@")
    workflow = path.rsplit("/", 1)[-1]
    if ref.startswith("refs/pull/"):
        ref = f"refs/heads/{default}" if default else ""
    if not ref or not workflow.endswith((".yml", ".yaml")):
        return None
    return workflow, ref


async def _installation(runtime: Runtime, env: ActionEnv) -> int:
    """The App's installation on the repository (App mode), else the token's stand-in id."""
    if not env.app_mode:
        return RUNNER_INSTALLATION
    return await runtime.github.repo_installation(env.owner, env.repo)


def _api_use(github: GitHubApp) -> str:
    """The run's GitHub API requests, and what the token has left this hour (GITHUB_TOKEN:
    1,000 an hour per repository, shared by every run); a warning in the log when under a
    tenth is left."""
    said = f"GitHub API: {github.requests:,} request(s) this run"
    quota = github.quotas.get("core")
    if quota is None:
        return said
    reset = time.strftime("%H:%M UTC", time.gmtime(quota.reset_at))
    said += f"; {quota.remaining:,} of {quota.limit:,} left until {reset}"
    if quota.remaining < quota.limit / 10:
        log.warning("%s: jobs wait at GitHub's rate limit when none is left", said)
    return said


async def _transcripts_shown(runtime: Runtime, jobs: tuple[JobStatus, ...]) -> list[int]:
    """The jobs whose project folds their transcripts into the run's summary."""
    return [
        status.job_id
        for status in jobs
        if (await runtime.office.runner_settings(status.job_id)).summary_transcripts
    ]


def summary(run: ActionRun, env: ActionEnv) -> str:
    """The run's summary for GITHUB_STEP_SUMMARY: each job's summary (bot/runner/summary.py),
    with its transcripts where its project shows them, made safe like all the App posts."""
    agent = Outbound(env.owner, env.repo, 0, env.server_url)
    lines = ["## TeaParty", "", f"Event `{env.event_name}`: {agent.inline(run.outcome)}", ""]
    if run.parked_for_time:
        lines += [_time_note(run), ""]
    lines += jobs_summary(run.jobs, run.transcripts, agent=agent, redact=redactor(env.environ))
    if not run.jobs:
        lines.append("No job has work.")
    if run.api:
        lines += ["", run.api + "."]
    return "\n".join(lines) + "\n"


def _time_note(run: ActionRun) -> str:
    """What the run did at its time limit, and why it started a continuation or none."""
    if run.continued:
        return (
            "The run reached its time limit: its jobs stopped where they stood, and its "
            f"continuation ({run.continued}) goes on from there."
        )
    if run.work_left:
        return (
            "The run reached its time limit with work left, and started no continuation "
            "(GITHUB_WORKFLOW_REF names no workflow): the next event's run goes on."
        )
    if any(job.state not in ("done", "cancelled") for job in run.jobs):
        return (
            "The run reached its time limit with nothing a run could do now: every unfinished "
            "job waits on a person (to answer a question, resume a pause, retry a failure), so "
            "no continuation was started; the run that person's reply brings goes on."
        )
    return "The run reached its time limit with every job ended: nothing to continue."


async def state_auth(env: ActionEnv) -> str:
    """The header git sends to the repository for the run's state: the run's token's, or in
    App mode a fresh installation token's."""
    if not env.app_mode:
        return git_credentials(env.token)
    app = GitHubApp(app_id=env.app_id, private_key=env.private_key, api_url=env.api_url)
    try:
        installation = await app.repo_installation(env.owner, env.repo)
        return git_credentials(await app.token(installation))
    finally:
        await app.aclose()
