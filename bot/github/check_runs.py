"""The App's own check run on a commit, as one installation: made, updated, found again.

Creating a check run is not idempotent: a 5xx or a lost connection may have made it, so
before the create is tried again the run is looked for on its commit (by name, by the App,
and by the `external_id` that names the job and round it belongs to: `Installation`'s
`effect` mechanism, as for a comment). An update names its run and is simply repeated.
Both need the installation's `checks: write`; until it is accepted GitHub answers 403
("Resource not accessible by integration"), raised as `GitHubError` for the caller.

GitHub refuses an `output.summary` or `output.text` longer than 65,535 characters (422):
`fit` cuts a text to that size and says so at its end.
"""

from __future__ import annotations

from typing import Any

from bot.github.client import Installation, Json

OUTPUT_LIMIT = 65_535  # characters of a check run's output.summary, and of its output.text
CUT_NOTE = "\n\n… (cut here: GitHub keeps at most 65,535 characters of a check run's {part})"


def fit(text: str, *, part: str = "summary", limit: int = OUTPUT_LIMIT) -> str:
    """`text` within GitHub's limit for a check run's `part`, cut with a note when longer."""
    if len(text) <= limit:
        return text
    note = CUT_NOTE.format(part=part)
    return text[: limit - len(note)].rstrip() + note


class CheckRuns:
    """One repository's check runs made by the App, through one installation."""

    def __init__(self, gh: Installation, owner: str, repo: str, *, app_id: int | None) -> None:
        self.gh = gh
        self.owner = owner
        self.repo = repo
        self.app_id = app_id  # the App's id: another app's run of the same name is not ours

    async def create(self, body: Json) -> Json:
        """Make a check run (`body`: name, head_sha, external_id, status, output, ...); after a
        failed attempt, the one that attempt made if it is found."""
        owner, repo = self.owner, self.repo
        sha, name, ref = str(body["head_sha"]), str(body["name"]), str(body["external_id"])

        async def effect() -> Json | None:
            return await self.find(sha, name=name, external_id=ref)

        return await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.checks.async_create(owner, repo, data=body),
            write=True,
            effect=effect,
        )

    async def update(self, run_id: int, body: Json) -> Json:
        """Change a check run's status, conclusion or output."""
        owner, repo = self.owner, self.repo
        return await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.checks.async_update(owner, repo, run_id, data=body),
            write=True,
        )

    async def find(self, sha: str, *, name: str, external_id: str) -> Json | None:
        """The App's check run on commit `sha` called `name` bearing `external_id`, or None."""
        owner, repo = self.owner, self.repo
        extra: dict[str, Any] = {} if self.app_id is None else {"app_id": self.app_id}
        body = await self.gh.app.call(
            self.gh.gh,
            lambda gh: gh.rest.checks.async_list_for_ref(
                owner, repo, sha, check_name=name, filter_="all", per_page=100, **extra
            ),
        )
        for run in (body or {}).get("check_runs") or []:
            app = run.get("app") if isinstance(run.get("app"), dict) else {}
            ours = self.app_id is None or app.get("id") == self.app_id
            if ours and run.get("external_id") == external_id:
                return dict(run)
        return None
