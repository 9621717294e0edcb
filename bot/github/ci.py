"""What the App reads of CI on a commit, and the re-runs it asks for, as one installation.

Check suites and check runs need `checks: read`; a check run's annotations come with it. An
Actions job's log needs `actions: read`: GitHub answers 302 to a short-lived download URL on
another host, which the same client follows without the token (httpx drops Authorization
when a redirect leaves the API's origin). Re-running an Actions job needs `actions: write`;
rerequesting another app's check run, `checks: write`. Until an installation accepts those,
GitHub answers 403, raised as `GitHubError` with its status for the caller to degrade on.
"""

from __future__ import annotations

from typing import Any

from bot.github.client import Installation, Json

NEEDS = {
    "checks: read": "the check suites and runs, and their annotations, could not be read",
    "actions: read": "the failing jobs' logs could not be read",
    "actions: write": "failing jobs could not be re-run, so a flaky one cannot be told apart",
    "checks: write": "failing check runs could not be rerequested, so a flaky one cannot be"
    " told apart",
}


def refused(permission: str, *, need: str | None = None) -> str:
    """What the tracking comment says while an installation has not accepted `permission`
    (`need`: what goes without it, when not what CI needs it for)."""
    return (
        f"⚠️ {need or NEEDS[permission]}: GitHub answered 403 because this installation has "
        f"not accepted the App's `{permission}` permission yet (an owner accepts it in the "
        "installation's settings)."
    )


PER_PAGE = 100
MAX_PAGES = 5  # of suites or runs of one commit: 500 is more than any CI makes
ANNOTATIONS = 50  # of one check run: the brief keeps fewer


class CiReader:
    """CI of one repository's commits, read (and re-run) through one installation."""

    def __init__(self, gh: Installation, owner: str, repo: str) -> None:
        self.gh = gh
        self.owner = owner
        self.repo = repo

    async def _listed(self, key: str, call: Any) -> list[Json]:
        found: list[Json] = []
        for page in range(1, MAX_PAGES + 1):
            body = await self.gh.app.call(self.gh.gh, call(page))
            items = list((body or {}).get(key) or [])
            found += items
            if len(items) < PER_PAGE:
                break
        return found

    async def suites(self, sha: str) -> list[Json]:
        """The check suites of commit `sha`."""
        owner, repo = self.owner, self.repo
        return await self._listed(
            "check_suites",
            lambda n: (
                lambda gh: gh.rest.checks.async_list_suites_for_ref(
                    owner, repo, sha, per_page=PER_PAGE, page=n
                )
            ),
        )

    async def runs(self, sha: str) -> list[Json]:
        """The newest check run of each name on commit `sha`."""
        owner, repo = self.owner, self.repo
        return await self._listed(
            "check_runs",
            lambda n: (
                lambda gh: gh.rest.checks.async_list_for_ref(
                    owner, repo, sha, filter_="latest", per_page=PER_PAGE, page=n
                )
            ),
        )

    async def annotations(self, run_id: int) -> list[Json]:
        """The first annotations of check run `run_id`."""
        owner, repo = self.owner, self.repo
        body = await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.checks.async_list_annotations(
                owner, repo, run_id, per_page=ANNOTATIONS
            ),
        )
        return list(body or [])

    async def job_log(self, job_id: int) -> str:
        """The log of Actions job `job_id` (its check run's id), as plain text."""
        owner, repo = self.owner, self.repo
        body = await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.actions.async_download_job_logs_for_workflow_run(
                owner, repo, job_id
            ),
            text=True,
        )
        return str(body or "")

    async def rerun_job(self, job_id: int) -> None:
        """Run Actions job `job_id` again (a new attempt in the same workflow run)."""
        owner, repo = self.owner, self.repo
        await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.actions.async_re_run_job_for_workflow_run(owner, repo, job_id),
            write=True,
        )

    async def rerequest_run(self, run_id: int) -> None:
        """Ask another app to run check run `run_id` again."""
        owner, repo = self.owner, self.repo
        await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.checks.async_rerequest_run(owner, repo, run_id),
            write=True,
        )
