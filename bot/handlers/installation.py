"""installation.deleted and installation_repositories.removed: the App no longer serves those
repositories, so their running jobs are withdrawn and their folders deleted.

The handler reads which jobs the App started in the installation (from the subjects it
linked to them: no call to GitHub, which no longer answers for these repositories),
`decide_removed` turns that into one action with no I/O, and `perform`
carries it out: the running jobs are withdrawn first, then each repository's folder under
`TEAPARTY_HOME/repos/github/` (mirror, job repositories, worktrees) is deleted once no
running job comes from it. Nothing is posted: the App cannot reach those issues any more.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.github.subject import Subject
from bot.handlers.actions import Action, Ignore, LeaveRepos, Outcome
from bot.handlers.app_context import AppContext
from bot.handlers.deliveries import ReposRemoved
from bot.handlers.perform import perform


@dataclass(frozen=True)
class InstalledJob:
    """A job the App started through some installation: its id, state and repository."""

    job_id: int
    state: str
    installation_id: int
    repo: str  # `owner/name`


async def on_repos_removed(command: ReposRemoved, ctx: AppContext) -> Outcome:
    """Withdraw the jobs of the repositories the App lost, and delete their folders."""
    jobs = tuple(
        InstalledJob(job.job_id, job.state, s.installation_id, f"{s.owner}/{s.repo}")
        for job in await ctx.ports.records.linked("github", active=False)
        for s in (Subject.from_json(job.subject),)
    )
    return await perform(ctx, decide_removed(command, jobs), repo=None, number=None)


def decide_removed(command: ReposRemoved, jobs: tuple[InstalledJob, ...]) -> tuple[Action, ...]:
    """What to do when the App loses repositories; performs no I/O."""
    lost = None if command.repos is None else {name.casefold() for name in command.repos}
    mine = [
        job
        for job in jobs
        if job.installation_id == command.installation_id
        and (lost is None or job.repo.casefold() in lost)
    ]
    repos = dict.fromkeys([*(command.repos or ()), *(job.repo for job in mine)])
    if not repos:
        return (Ignore(f"installation {command.installation_id}: no repository of a job"),)
    active = tuple(job.job_id for job in mine if job.state == "active")
    return (LeaveRepos(active, tuple(repos), command.sender.login),)
