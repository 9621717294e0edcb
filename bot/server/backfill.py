"""What GitHub's delivery history cannot give back, read from the issues themselves.

GitHub keeps a few days of deliveries (bot/server/catchup.py asks for those again). Past
that, and whenever a redelivery is lost too, the App reads the state it acts on:

- **answers**: for every job parked at a question the App posted, the issue's comments
  since it was asked; each comment by the decider posted after a question becomes a
  delivery, as if GitHub had sent it (`issue_comment.created`).
- **activity** (runner mode, every run): for every live job, what was said since the last
  run read GitHub (the store's read mark) — comments on its issue and its pull request,
  reviews of its pull request, its issue closed, its pull request merged or closed — each
  as the delivery GitHub Actions would have given a run that never started
  (`issue_comment.created`, `pull_request_review.submitted`, `issues.closed`,
  `pull_request.closed`). A pull request made a draft or ready, and a label removed, are
  not read (only the issue's events say who did it).
- **labels in one repository** (runner mode, every run): the trigger label added since the
  last run read GitHub to an open issue with no job, as below.
- **labels** (on start): every repository of every installation, for open issues that carry
  the trigger label and have no job; the latest time the label was added becomes a
  delivery (`issues.labeled`, its sender the person who added it), so who may start a job
  is decided as for any label.

Each delivery's id names what it stands for (`catch-up:comment:{id}`, `catch-up:review:{id}`,
`catch-up:labeled:{event id}`), and a comment's or a review's subject is the one its webhook
carries (`comment:{id}`, bot/server/webhooks.py), so reading the same state again, or what
a webhook already brought, stores nothing new; the handlers decide as they would for
GitHub's own delivery: a comment answers one gate, once (the store records which), and an
issue with a job starts no second one.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bot.errors import BotError, GitHubError, RateLimitedError
from bot.github.client import Clock, GitHubApp, Installation, Json, github_time
from bot.github.reviews import PullReviews
from bot.github.subject import Subject
from bot.handlers.actions import job_key
from bot.handlers.issue_comment import comment_ref
from bot.handlers.repos import PROJECT_FILE, Repos, load_config, trigger_label
from bot.server.webhooks import subject_of
from orchestrator.api import Arrival, Gate, Office, OrchestratorError, Ports, Pull

log = logging.getLogger(__name__)

CLOCK_SKEW_S = 600.0  # comments are read from this long before a question was asked
RATE_RESERVE = 1000  # a label scan leaves an installation this many requests an hour
LIVE = ("active", "complete")  # the job states whose issue and pull request are read
ENDED_PULLS = ("merged", "gone")  # a job whose pull request ended this way hears nothing more


@dataclass(frozen=True)
class Parked:
    """A job waiting at questions the App posted on its issue."""

    subject: Subject
    since: float  # when the oldest of them was asked
    after: int  # the id of the oldest question's comment


class Backfill:
    """Turns what happened on GitHub while no delivery reached the App into deliveries."""

    def __init__(
        self,
        github: GitHubApp,
        office: Office,
        ports: Ports,
        repos: Repos,
        *,
        on_stored: Callable[[], None] = lambda: None,
        clock: Clock = time.time,
    ) -> None:
        self.github = github
        self.office = office
        self.ports = ports
        self.repos = repos
        self.on_stored = on_stored
        # Labels added from this (whole) second on reach the App as webhooks; one added just
        # before it and lost is still in GitHub's delivery history (CatchUp).
        self.started_at = float(int(clock()))
        # What `activity` or `labels_in` could not read: a read mark must not pass it by.
        self.unread: list[str] = []

    async def answers(self) -> list[str]:
        """Store the replies to parked jobs' questions; the ids of the deliveries new here."""
        app = (await self.github.identity()).login.casefold()
        arrivals = []
        for job_id, parked in (await self._parked()).items():
            s = parked.subject
            try:
                gh = await self.github.installation(s.installation_id)
                comments = await gh.comments(s.owner, s.repo, s.number, since=parked.since)
            except RateLimitedError:
                raise
            except GitHubError as exc:  # one issue out of reach (uninstalled?): the rest go on
                log.warning(
                    "job %d: replies not read from %s/%s#%d: %s",
                    job_id,
                    s.owner,
                    s.repo,
                    s.number,
                    exc,
                )
                continue
            for comment in comments:
                author = str((comment.get("user") or {}).get("login", "")).casefold()
                if (
                    int(comment.get("id", 0)) <= parked.after
                    or author == app
                    or author != s.decider.casefold()
                    or await self.office.answered_from(comment_ref(int(comment["id"]))) is not None
                ):
                    continue
                arrivals.append(_comment_arrival(s, comment))
                log.info("job %d: reply %s read from the issue", job_id, comment["id"])
        return await self._store(arrivals)

    async def activity(self, *, since: float) -> list[Found]:
        """What was said on live jobs' issues and pull requests since `since` (less the clock
        skew): comments and reviews by anyone but the App, oldest first, not yet stored. A
        job whose issue or pull request is out of reach is logged and skipped."""
        app = (await self.github.identity()).login.casefold()
        start = since - CLOCK_SKEW_S
        found: list[Found] = []
        for linked in await self.ports.records.linked("github", active=False):
            pull = await self.ports.reviews.pull(linked.job_id)
            ended = pull is None or pull.state in ENDED_PULLS
            if linked.state not in LIVE or (linked.state == "complete" and ended):
                continue
            s = Subject.from_json(linked.subject)
            try:
                gh = await self.github.installation(s.installation_id)
                found += _comments(s, await gh.comments(s.owner, s.repo, s.number, since=start))
                if pull is not None and not ended:
                    found += await _pull_activity(gh, s, pull, start)
                if linked.state == "active":  # after a merge that closed it, if one did
                    found += _closed(s, await gh.issue(s.owner, s.repo, s.number))
            except RateLimitedError:
                raise
            except GitHubError as exc:
                log.warning("job %d: %s/%s not read: %s", linked.job_id, s.owner, s.repo, exc)
                self.unread.append(f"job {linked.job_id}")
        # A close is read whenever it happened: the store says the job goes on.
        mine = [
            f for f in found if f.author != app and (f.at >= start or f.arrival.action == "closed")
        ]
        return sorted(mine, key=lambda f: f.at)

    async def store(self, arrivals: list[Arrival]) -> list[str]:
        """Store deliveries in this order; the ids new here (nothing seen before)."""
        return await self._store(arrivals)

    async def labels(self) -> list[str]:
        """Store the trigger labels on open issues without a job; the ids new here."""
        arrivals: list[Arrival] = []
        for installation in await self.github.installations():
            gh = await self.github.installation(int(installation["id"]))
            for repo in await gh.repositories():
                if gh.remaining is not None and gh.remaining < RATE_RESERVE:
                    log.warning(
                        "installation %s: labels not read past %s (%d requests left)",
                        installation["id"],
                        repo.get("full_name"),
                        gh.remaining,
                    )
                    break
                if repo.get("archived") or repo.get("disabled") or not repo.get("has_issues"):
                    continue
                try:
                    found = await self._labelled(
                        gh, int(installation["id"]), repo, webhooks_from=self.started_at
                    )
                    arrivals.extend(f.arrival for f in found)
                except RateLimitedError:
                    raise
                except GitHubError as exc:
                    log.warning("%s: labels not read: %s", repo.get("full_name"), exc)
        return await self._store(arrivals)

    async def labels_in(
        self, installation_id: int, repo: Json, *, since: float, skip: int | None = None
    ) -> list[Found]:
        """Runner mode: the trigger label added since `since` (less the clock skew) to open
        issues of `repo` that have no job (but issue `skip`, the run's own), not yet stored.
        A project file that cannot be read, or GitHub failing, is logged: nothing found."""
        start = since - CLOCK_SKEW_S
        try:
            gh = await self.github.installation(installation_id)
            found = await self._labelled(gh, installation_id, repo, webhooks_from=None)
        except RateLimitedError:
            raise
        except (GitHubError, BotError, OrchestratorError) as exc:
            log.warning("%s: labels not read: %s", repo.get("full_name"), exc)
            self.unread.append(f"labels of {repo.get('full_name')}")
            return []
        return [f for f in found if f.at >= start and f.number != skip]

    async def _labelled(
        self, gh: Installation, installation_id: int, repo: Json, *, webhooks_from: float | None
    ) -> list[Found]:
        """The trigger label on open issues of `repo` without a job, by the event that added
        it; labels added from `webhooks_from` on are left to their webhooks (App mode)."""
        owner, name = str(repo["owner"]["login"]), str(repo["name"])
        # Read past the handlers' cache: a label added after start then costs its job the
        # same calls as any other.
        text = await gh.file(owner, name, PROJECT_FILE, ref=str(repo["default_branch"]))
        config = load_config(
            text, owner=owner, repo=name, org=self.repos.org, kinds=self.repos.kinds
        )
        label = trigger_label(config)
        found = []
        for issue in await gh.labelled_issues(owner, name, label):
            number = int(issue["number"])
            if "pull_request" in issue or await self.ports.records.job_for_key(
                job_key(owner, name, number)
            ):
                continue
            added = _last_labelled(await gh.issue_events(owner, name, number), label)
            at = github_time(added.get("created_at")) if added is not None else 0.0
            if webhooks_from is not None and at >= webhooks_from:
                continue  # under way as a webhook
            if added is None:
                log.warning(
                    "%s/%s#%d carries %r, but no event says who added it",
                    owner,
                    name,
                    number,
                    label,
                )
                continue
            author = str((added.get("actor") or {}).get("login", "")).casefold()
            arrival = _label_arrival(repo, issue, added, installation_id)
            found.append(Found(at, author, arrival, number))
            log.info("%s/%s#%d: label %r found without a job", owner, name, number, label)
        return found

    async def _parked(self) -> dict[int, Parked]:
        """Jobs the App started that wait at a question it posted, by job id."""
        by_job: dict[int, list[Gate]] = {}
        for gate in await self.office.open_gates():
            if gate.job_id is not None and (gate.comment_ref or "").isdigit():
                by_job.setdefault(gate.job_id, []).append(gate)
        parked = {}
        for job_id, gates in by_job.items():
            linked = await self.ports.records.subject(job_id, "github")
            if linked is None:
                continue
            parked[job_id] = Parked(
                Subject.from_json(linked),
                since=min(gate.asked_at for gate in gates) - CLOCK_SKEW_S,
                after=min(int(gate.comment_ref or 0) for gate in gates),
            )
        return parked

    async def _store(self, arrivals: list[Arrival]) -> list[str]:
        if not arrivals:
            return []
        stored = await self.ports.deliveries.record_all(arrivals)
        new = [a.delivery_id for a, fresh in zip(arrivals, stored, strict=True) if fresh]
        if new:
            self.on_stored()
        return new


@dataclass(frozen=True)
class Found:
    """Something said on GitHub, as the delivery it would have been: when, and by whom."""

    at: float
    author: str  # casefolded
    arrival: Arrival
    number: int | None = None  # the issue a label was added to


def _comments(s: Subject, comments: Iterable[Json], *, pull: int | None = None) -> list[Found]:
    return [
        Found(
            github_time(c.get("created_at")),
            str((c.get("user") or {}).get("login", "")).casefold(),
            _comment_arrival(s, c, pull=pull),
        )
        for c in comments
        if c.get("user")  # a deleted account's comment says nothing a job acts on
    ]


def _reviews(s: Subject, pr: Json, reviews: Iterable[Json]) -> list[Found]:
    """The pull request's submitted reviews (pending ones are nobody's yet)."""
    return [
        Found(
            github_time(r["submitted_at"]),
            str(r["user"].get("login", "")).casefold(),
            _review_arrival(s, pr, r),
        )
        for r in reviews
        if r.get("user") and r.get("submitted_at")
    ]


async def _pull_activity(gh: Installation, s: Subject, pull: Pull, start: float) -> list[Found]:
    """The job's pull request: its comments since `start`, its reviews, and its close when
    the store still has it open."""
    reader = PullReviews(gh)
    pr = await reader.pull(s.owner, s.repo, pull.number)
    said = await gh.comments(s.owner, s.repo, pull.number, since=start)
    found = _comments(s, said, pull=pull.number)
    found += _reviews(s, pr, await reader.reviews(s.owner, s.repo, pull.number))
    if pr.get("state") == "closed" and pull.state in ("open", "draft"):
        closer = None if pr.get("merged") else await gh.issue(s.owner, s.repo, pull.number)
        found += _pull_closed(s, pr, closer)
    return found


def _pull_closed(s: Subject, pr: Json, closer: Json | None) -> list[Found]:
    """The pull request's close, merged or not, as GitHub would have delivered it: the
    sender is who merged it, or (`closer`, its issue) who closed it."""
    by = pr.get("merged_by") if pr.get("merged") else (closer or {}).get("closed_by")
    if not isinstance(by, dict) or not pr.get("closed_at"):
        return []
    payload = _payload(s, "closed", by, number=pr["number"], pull_request=pr)
    arrival = _arrival(f"catch-up:pull-closed:{pr['id']}", "pull_request", payload)
    return [Found(github_time(pr["closed_at"]), str(by.get("login", "")).casefold(), arrival)]


def _closed(s: Subject, issue: Json) -> list[Found]:
    """The job's issue closed, as GitHub would have delivered it (the sender: who closed it)."""
    by = issue.get("closed_by")
    if issue.get("state") != "closed" or not isinstance(by, dict) or not issue.get("closed_at"):
        return []
    payload = _payload(s, "closed", by, issue=issue)
    arrival = _arrival(f"catch-up:issue-closed:{issue['id']}", "issues", payload)
    return [Found(github_time(issue["closed_at"]), str(by.get("login", "")).casefold(), arrival)]


def _last_labelled(events: Iterable[Json], label: str) -> Json | None:
    """The latest event that added `label` (names compared as GitHub does, any case)."""
    found = None
    for event in events:
        name = str((event.get("label") or {}).get("name", ""))
        if event.get("event") == "labeled" and name.casefold() == label.casefold():
            found = event
    return found


def _comment_arrival(s: Subject, comment: Json, *, pull: int | None = None) -> Arrival:
    issue: Json = {"number": s.number, "title": s.title, "labels": []}
    if pull is not None:  # a comment in the job's pull request's conversation
        issue = {"number": pull, "title": s.title, "labels": [], "pull_request": {}}
    payload = _payload(s, "created", comment.get("user"), issue=issue, comment=comment)
    return _arrival(f"catch-up:comment:{comment['id']}", "issue_comment", payload)


def _review_arrival(s: Subject, pr: Json, review: Json) -> Arrival:
    payload = _payload(s, "submitted", review.get("user"), review=review, pull_request=pr)
    return _arrival(f"catch-up:review:{review['id']}", "pull_request_review", payload)


def _payload(s: Subject, action: str, sender: object, **about: Json) -> Json:
    """A webhook payload for the job's repository: `action`, what it is `about`, who did it."""
    return {
        "action": action,
        **about,
        "repository": _repository(s.owner, s.repo, s.default_branch),
        "installation": {"id": s.installation_id},
        "sender": sender,
    }


def _arrival(delivery_id: str, event: str, payload: Json) -> Arrival:
    action = str(payload["action"])
    return Arrival(delivery_id, event, action, _body(payload), subject_of(event, payload))


def _label_arrival(repo: Json, issue: Json, added: Json, installation_id: int) -> Arrival:
    payload = {
        "action": "labeled",
        "issue": issue,
        "label": added["label"],
        "repository": repo,
        "installation": {"id": installation_id},
        "sender": added.get("actor"),
    }
    return Arrival(f"catch-up:labeled:{added['id']}", "issues", "labeled", _body(payload))


def _repository(owner: str, name: str, default_branch: str) -> Json:
    return {
        "name": name,
        "full_name": f"{owner}/{name}",
        "owner": {"login": owner},
        "default_branch": default_branch,
    }


def _body(payload: Json) -> bytes:
    return json.dumps(payload, separators=(",", ":")).encode()
