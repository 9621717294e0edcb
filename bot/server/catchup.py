"""Catching up after downtime: the deliveries GitHub failed to make are asked for again.

GitHub does not retry a failed delivery: a label added or a reply written while the App
was down would be lost. On start, and every `interval_s` after, the App reads its recent
delivery attempts (`GET /app/hook/deliveries`, newest first, back to GitHub's three days
and at most `MAX_PAGES` pages) and, for each event none of whose attempts reached it and
which the store never received, asks GitHub once for a redelivery (`POST …/attempts`).
Only attempts that failed on the way (no answer, a timeout, a 5xx) are asked for again: a
4xx was the App's own refusal. A redelivery is an ordinary signed webhook with the same
`X-GitHub-Delivery` id, so the delivery queue's dedupe keeps it exactly-once.

What the history cannot give back (older than three days, or lost again) the `Backfill`
reads from the issues: each pass, the replies to the questions jobs are parked at; once
after start, open issues that carry the trigger label and have no job.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection

from bot.errors import GitHubError, RateLimitedError
from bot.github.client import Clock, GitHubApp, Json, github_time
from bot.server.backfill import Backfill
from orchestrator.api import Deliveries

log = logging.getLogger(__name__)

HISTORY_S = 3 * 24 * 3600.0  # how far back GitHub keeps deliveries it can redeliver
MAX_PAGES = 20  # 2,000 attempts a pass at most: a bounded share of the App's rate limit
INTERVAL_S = 600.0
# What a process asks GitHub once, whatever its jobs (OpenAPI operation ids): its identity,
# and catching up on start: the delivery log, the installations, their repositories and
# each one's labelled issues (and, per repository, its project file: `issues/list-for-repo`
# comes with one `repos/get-content`).
PER_PROCESS_CALLS = (
    "apps/get-authenticated",
    "apps/list-webhook-deliveries",
    "apps/list-installations",
    "apps/list-repos-accessible-to-installation",
    "issues/list-for-repo",
)


class CatchUp:
    """Asks GitHub again for the deliveries that never reached the App."""

    def __init__(
        self,
        github: GitHubApp,
        queue: Deliveries,
        *,
        events: Collection[str],
        clock: Clock = time.time,
        interval_s: float = INTERVAL_S,
        backfill: Backfill | None = None,
    ) -> None:
        self.github = github
        self.queue = queue
        self.events = events
        self.clock = clock
        self.interval_s = interval_s
        self.backfill = backfill
        self._asked: set[str] = set()  # asked for by this process: under way, not again
        self._labels_read = False  # the label scan runs until it succeeds once
        self.passed = asyncio.Event()  # set once the first pass is over, well or not

    async def everything(self) -> list[str]:
        """One whole pass: redeliveries asked for, then what the issues say (see Backfill);
        the delivery ids asked for or stored."""
        found = await self.once()
        if self.backfill is not None:
            found += await self.backfill.answers()
            if not self._labels_read:
                found += await self.backfill.labels()
                self._labels_read = True
        return found

    async def once(self) -> list[str]:
        """One pass: the delivery ids (GUIDs) a redelivery was asked for."""
        missed = await self._missed()
        asked = []
        for guid, attempt in missed.items():
            if await self.queue.get(guid) is not None:
                continue  # it arrived by another attempt after all
            await self.github.redeliver(int(attempt["id"]))
            self._asked.add(guid)
            asked.append(guid)
            log.info("delivery %s (%s) never arrived: redelivery asked for", guid, attempt["event"])
        return asked

    async def _missed(self) -> dict[str, Json]:
        """The newest failed attempt of each event no attempt delivered, within the history."""
        reached: set[str] = set()
        failed: dict[str, Json] = {}
        since = self.clock() - HISTORY_S
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page, cursor = await self.github.deliveries(cursor=cursor)
            for attempt in page:
                if github_time(attempt.get("delivered_at")) < since:
                    cursor = None
                    break
                guid = str(attempt.get("guid"))
                code = attempt.get("status_code")
                if isinstance(code, int) and 200 <= code < 300:
                    reached.add(guid)
                elif (code in (0, None) or (isinstance(code, int) and code >= 500)) and (
                    attempt.get("event") in self.events
                ):
                    failed.setdefault(guid, attempt)
            if cursor is None:
                break
        return {
            guid: attempt
            for guid, attempt in failed.items()
            if guid not in reached and guid not in self._asked
        }

    async def run(self) -> None:
        """Catch up now and every `interval_s`, until cancelled; GitHub's faults wait a pass."""
        while True:
            wait = self.interval_s
            try:
                await self.everything()
            except RateLimitedError as exc:
                wait = max(wait, exc.retry_at - self.clock())
                log.warning("catching up waits for GitHub's rate limit: %s", exc)
            except GitHubError as exc:
                log.warning("catching up failed this time: %s", exc)
            self.passed.set()
            await asyncio.sleep(wait)
