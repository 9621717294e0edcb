"""check_suite.completed (the App) and workflow_run.completed (runner mode) on a job's pull
request: CI is part of the job.

The head's suites are read whole and the engine decides (`decide_ci`): wait while one still
runs; re-run each failing check once (an Actions job through Actions, another app's check
run rerequested) and call one that then passes flaky; start one round per head commit with
the failing checks, their annotations and the end of each one's log (Actions: the job's
log; other CI: the check run's output), made plain here and masked by the engine; after
`rounds.ci_rounds` automatic rounds in a row, wait for a person. Suites GitHub makes for
apps that never run a check stay `queued` forever, so only Actions' suites and suites with
check runs count as running; the App's own suites are not its CI.

Until an installation accepts `checks` and `actions`, GitHub answers 403 and this degrades:
a round with what could be read, no re-run, and the tracking comment says why.
"""

from __future__ import annotations

import logging
from dataclasses import replace

from bot.errors import GitHubError
from bot.github.ci import CiReader, refused
from bot.github.client import Json
from bot.github.job_check import JOB_CHECK_ID
from bot.github.sanitizer import sanitize
from bot.github.subject import Subject
from bot.handlers.actions import Ignore, Outcome, Report
from bot.handlers.app_context import AppContext
from bot.handlers.deliveries import ChecksCompleted
from bot.handlers.payloads import Repo
from orchestrator.api import (
    FAILED_CHECKS,
    CiFacts,
    CiIgnore,
    CiRerun,
    CiRound,
    CiSay,
    CiSuites,
    CiWait,
    FailedCheck,
    decide_ci,
    no_ci_note,
)

log = logging.getLogger(__name__)
ACTIONS = "github-actions"
PASSED = frozenset({"success", "neutral", "skipped"})
LOG_READ_CHARS = 40_000  # of a log's end, read before it is trimmed further
_UNREAD = CiSuites(1, (), (), ())  # before the suites are read: only the setting and head count


async def on_checks_completed(command: ChecksCompleted, ctx: AppContext) -> Outcome:
    """Follow CI on a job's pull request head: a completed suite is read with the others."""
    repo = command.repo
    identity = await ctx.github.identity()
    if identity.login != f"{ACTIONS}[bot]" and command.app_id == identity.app_id:
        return Ignore(f"check suite {command.suite_id} is the App's own").outcome
    for number in command.pull_numbers:
        job_id = await ctx.ports.reviews.job_of_pull(f"github/{repo.full_name}", number)
        if job_id is not None:
            return await follow(ctx, job_id, command, own_app=identity.app_id)
    return Ignore(f"check suite {command.suite_id} is on no job's pull request").outcome


async def follow(
    ctx: AppContext, job_id: int, command: ChecksCompleted, *, own_app: int | None
) -> Outcome:
    """Decide on the head's settled suites and carry it out."""
    settings = await ctx.office.round_settings(job_id)
    head = await ctx.office.branch_head(job_id)
    sha, limit, on = command.head_sha, settings.ci_rounds, settings.on_failed_checks
    early = decide_ci(_UNREAD, CiFacts(), on=on, limit=limit, sha=sha, head=head)
    if isinstance(early, CiIgnore):
        return Ignore(early.why, job_id).outcome
    pull = await ctx.ports.reviews.pull(job_id)
    if pull is not None and pull.state == "draft":
        # An early draft's head moves on as tasks merge (and a person's draft is not asked
        # for review): what failed here may be fixed before the job is done. Its checks are
        # decided once the pull request is ready and the job rests (`watch_started`).
        await ctx.ports.ci.defer(job_id, sha)
        why = f"checks of {sha[:12]} on a draft: decided once it is ready for review"
        return Ignore(why, job_id).outcome
    repo = command.repo
    reader = CiReader(await ctx.installation(repo), repo.owner, repo.name)
    suites, problems = await read_suites(reader, command, own_app=own_app)
    for _ in range(2):  # a second pass when no failing check could be re-run
        facts = await ctx.ports.ci.facts(job_id, sha)
        decided = decide_ci(suites, facts, on=on, limit=limit, sha=sha, head=head)
        if not isinstance(decided, CiRerun):
            break
        asked = await rerun(reader, decided.checks, problems)
        names = [c.name for c in decided.checks]
        note = (
            f"🔁 re-running {_names(asked)} on {sha[:12]} once, to tell a flaky failure from "
            "a real one."
        )
        await ctx.ports.ci.reran(job_id, sha, names, note=note if asked else None)
        await _say_problems(ctx, job_id, sha, problems)
        if asked:
            await ctx.driver.sync(job_id)
            return Report(f"re-running {_names(asked)} on {sha[:12]}", job_id).outcome
    return await _carry_out(ctx, job_id, sha, decided, reader, problems)


async def _carry_out(
    ctx: AppContext,
    job_id: int,
    sha: str,
    decided: CiIgnore | CiWait | CiRerun | CiSay | CiRound,
    reader: CiReader,
    problems: list[str],
) -> Outcome:
    match decided:
        case CiIgnore() | CiWait():
            await _say_problems(ctx, job_id, sha, problems, sync=True)
            return Ignore(decided.why, job_id).outcome
        case CiSay():
            fresh = await ctx.ports.ci.say(job_id, sha, decided)
            await _say_problems(ctx, job_id, sha, problems)
            await ctx.driver.sync(job_id)
            said = "said" if fresh else "said before"
            return Report(f"{decided.kind} on {sha[:12]}: {said}", job_id).outcome
        case CiRound():
            checks = [await enrich(reader, c, problems) for c in decided.checks]
            taken = await ctx.ports.ci.start_round(job_id, sha, checks, flaky=decided.flaky)
            await _say_problems(ctx, job_id, sha, problems)
            await ctx.driver.sync(job_id)
            if taken is None or taken.round_number is None:
                return Report(f"checks on {sha[:12]}: a round ran for it already", job_id).outcome
            return Report(
                f"round {taken.round_number}: {taken.added} failing check(s), {taken.state}",
                job_id,
            ).outcome
        case CiRerun():  # both passes asked for re-runs none of which could be made
            return Report(f"checks on {sha[:12]}: no re-run could be made", job_id).outcome


async def _say_problems(
    ctx: AppContext, job_id: int, sha: str, problems: list[str], *, sync: bool = False
) -> None:
    fresh = [await ctx.ports.ci.note(job_id, sha, f"refused:{p[:60]}", p) for p in problems]
    if sync and any(fresh):
        await ctx.driver.sync(job_id)


def _names(checks: tuple[FailedCheck, ...] | list[FailedCheck]) -> str:
    return ", ".join(f"`{c.name}`" for c in checks)


# --- reading CI -----------------------------------------------------------------------------


async def read_suites(
    reader: CiReader, command: ChecksCompleted, *, own_app: int | None
) -> tuple[CiSuites, list[str]]:
    """The head's suites as the engine decides on them, and what could not be read and why."""
    try:
        suites = await reader.suites(command.head_sha)
        runs = await reader.runs(command.head_sha)
    except GitHubError as exc:
        if exc.status != 403:
            raise
        failed: tuple[FailedCheck, ...] = ()
        if command.failed:  # what the webhook said is all there is
            failed = (
                FailedCheck(
                    command.app_name,
                    command.conclusion,
                    command.suite_id,
                    command.app_name,
                    url=command.runs_url,
                ),
            )
        return CiSuites(0, (), failed, ()), [refused("checks: read")]
    return suites_of(suites, runs, own_app=own_app), []


def _app(item: Json) -> Json:
    app = item.get("app")
    return app if isinstance(app, dict) else {}


def suites_of(suites: list[Json], runs: list[Json], *, own_app: int | None) -> CiSuites:
    """The engine's view of a commit's suites and latest runs (another app's text made
    plain); the App's own are left out unless it acts as Actions (runner mode), and the
    job's own `TeaParty` check run always (made with GITHUB_TOKEN, it is Actions')."""

    def ours(item: Json) -> bool:
        return _ours(item, own_app)

    kept = [s for s in suites if not ours(s)]
    running = sum(
        1
        for s in kept
        if s.get("status") != "completed"
        and (_app(s).get("slug") == ACTIONS or int(s.get("latest_check_runs_count") or 0) > 0)
    )
    awaiting = tuple(
        sanitize(str(_app(s).get("name") or "a workflow"))
        for s in kept
        if s.get("conclusion") == "action_required"
    )
    mine = [r for r in runs if not ours(r)]
    failed = tuple(_failed(r) for r in mine if r.get("conclusion") in FAILED_CHECKS)
    passed = tuple(sanitize(str(r.get("name"))) for r in mine if r.get("conclusion") in PASSED)
    return CiSuites(running, awaiting, failed, passed)


def _ours(item: Json, own_app: int | None) -> bool:
    """Whether a suite or run is the App's own (not as Actions), or the job's check run."""
    app = _app(item)
    own = str(item.get("external_id") or "").startswith(JOB_CHECK_ID)
    return own or bool(app.get("id") == own_app and app.get("slug") != ACTIONS)


def _failed(run: Json) -> FailedCheck:
    app = _app(run)
    actions = app.get("slug") == ACTIONS
    output = run.get("output") if isinstance(run.get("output"), dict) else {}
    said = [str(output.get(k) or "") for k in ("title", "summary", "text")]
    return FailedCheck(
        sanitize(str(run.get("name") or "a check")),
        str(run.get("conclusion")),
        int(run["id"]),
        sanitize(str(app.get("name") or "a check")),
        rerun="job" if actions else "check-run",
        log=sanitize("\n\n".join(s for s in said if s.strip())[-LOG_READ_CHARS:]),
        url=str(run.get("html_url") or ""),
    )


async def rerun(
    reader: CiReader, checks: tuple[FailedCheck, ...], problems: list[str]
) -> list[FailedCheck]:
    """Ask for each re-run; those asked (none: the installation may not re-run them)."""
    asked: list[FailedCheck] = []
    for check in checks:
        permission = "actions: write" if check.rerun == "job" else "checks: write"
        try:
            if check.rerun == "job":
                await reader.rerun_job(check.run_id)
            else:
                await reader.rerequest_run(check.run_id)
        except GitHubError as exc:
            if exc.status not in (403, 404, 422):
                raise
            log.warning("re-run of %r refused: %s", check.name, exc)
            if exc.status == 403 and refused(permission) not in problems:
                problems.append(refused(permission))
            continue
        asked.append(check)
    return asked


async def enrich(reader: CiReader, check: FailedCheck, problems: list[str]) -> FailedCheck:
    """A failing check with its annotations and (Actions) its job's log, as far as the
    installation may read them."""
    notes: tuple[str, ...] = ()
    try:
        found = await reader.annotations(check.run_id)
        notes = tuple(
            sanitize(f"{a.get('path')}:{a.get('start_line')} {a.get('message') or ''}".strip())
            for a in found
            if a.get("annotation_level") in (None, "failure", "warning")
        )
    except GitHubError as exc:
        if exc.status != 403:
            raise
        if refused("checks: read") not in problems:
            problems.append(refused("checks: read"))
    if check.rerun != "job":
        return replace(check, annotations=notes)
    try:
        text = await reader.job_log(check.run_id)
        return replace(check, annotations=notes, log=sanitize(text[-LOG_READ_CHARS:]))
    except GitHubError as exc:
        if exc.status not in (403, 404, 410):
            raise
        why = "GitHub answered 410: the log expired" if exc.status == 410 else None
        if exc.status == 403:
            why = "the installation has not accepted `actions: read`"
            if refused("actions: read") not in problems:
                problems.append(refused("actions: read"))
        return replace(check, annotations=notes, log_note=why or "no log was found")


async def decide_deferred(ctx: AppContext, job_id: int) -> str | None:
    """The job's pull request is ready for review again: checks that completed on its head
    while it was a draft are decided now, as a delivery of them would have been (None:
    there were none). The sweep's `watch_started` does the same for a job that rests."""
    found = await ctx.ports.reviews.pull(job_id)
    subject = await ctx.ports.records.subject(job_id, "github")
    if found is None or found.state != "open" or subject is None:
        return None
    sha = await ctx.office.branch_head(job_id)
    if sha is None or not (await ctx.ports.ci.facts(job_id, sha)).deferred:
        return None
    return await _decide_deferred(ctx, job_id, Subject.from_json(subject), found.number, sha)


async def _decide_deferred(
    ctx: AppContext, job_id: int, where: Subject, number: int, sha: str
) -> str:
    if not await ctx.ports.ci.take_deferred(job_id, sha):
        return "decided elsewhere"  # the ready delivery and the sweep met: one decides
    repo = Repo(where.owner, where.repo, where.default_branch, where.installation_id, None)
    done = ChecksCompleted(repo, 0, "CI", "", sha, "", (number,), "")
    try:
        said, _ = await follow(ctx, job_id, done, own_app=(await ctx.github.identity()).app_id)
    except BaseException:
        await ctx.ports.ci.defer(job_id, sha)  # not decided: the next look tries again
        raise
    await ctx.ports.ci.ran(job_id, sha)
    log.info("job %d: checks of %s, deferred while a draft: %s", job_id, sha[:12], said)
    return "decided"


async def watch_started(ctx: AppContext, job_id: int, *, now: float, wait_s: float) -> str | None:
    """A resting job whose pull request is open: once its head has rested `wait_s` with no
    check suite that runs (Actions', or one with check runs), say on the tracking comment
    that no CI ran on it and why that may be. What this look found (None: nothing to do)."""
    found = await ctx.ports.reviews.pull(job_id)
    subject = await ctx.ports.records.subject(job_id, "github")
    if found is None or found.state != "open" or subject is None:
        return None
    if not (await ctx.office.round_settings(job_id)).on_failed_checks:
        return None
    sha = await ctx.office.branch_head(job_id)
    if sha is None:
        return None
    step = await ctx.ports.ci.watch(job_id, sha, now=now, wait_s=wait_s)
    where = Subject.from_json(subject)
    if step == "decide":  # its checks completed while it was a draft: decide on them now
        return await _decide_deferred(ctx, job_id, where, found.number, sha)
    if step != "look":
        return step
    reader = CiReader(await ctx.github.installation(where.installation_id), where.owner, where.repo)
    try:
        suites = await reader.suites(sha)
    except GitHubError as exc:
        if exc.status != 403:
            raise
        await ctx.ports.ci.ran(job_id, sha, note=refused("checks: read"))
        await ctx.driver.sync(job_id)
        return "refused"
    own_app = (await ctx.github.identity()).app_id  # its own check run is no CI
    started = [
        s
        for s in suites
        if not _ours(s, own_app)
        and (_app(s).get("slug") == ACTIONS or int(s.get("latest_check_runs_count") or 0) > 0)
    ]
    if started:
        await ctx.ports.ci.ran(job_id, sha)
        return "ran"
    await ctx.ports.ci.ran(job_id, sha, note=no_ci_note(sha, minutes=wait_s / 60))
    await ctx.driver.sync(job_id)
    return "no ci"


__all__ = ["Repo", "decide_deferred", "follow", "on_checks_completed", "watch_started"]
