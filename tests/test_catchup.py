"""Catching up, pass by pass: which missed deliveries are asked for again, and what the
issues themselves are read for (replies at parked questions, trigger labels without a job).

GitHub here is a small in-memory stand-in of the calls the two classes make; the store and
its delivery queue are real. What the App does with what it stores is tested end to end in
test_app_faults.py and test_app_backfill.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from fakes import unanswered_gate

from bot.errors import GitHubError
from bot.github.client import Identity
from bot.github.subject import Subject
from bot.handlers.actions import job_key
from bot.handlers.deliveries import CommentAdded, LabelAdded
from bot.handlers.payloads import parse_command
from bot.handlers.repos import Repos
from bot.server.backfill import RATE_RESERVE, Backfill
from bot.server.catchup import HISTORY_S, CatchUp
from orchestrator.api import DeliveryQueue, Gate
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.store.sqlite import Store

NOW = 2_000_000_000.0
APP = Identity("teaparty[bot]", 77)
EVENTS = frozenset({"issues", "issue_comment"})


def stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat().replace("+00:00", "Z")


def attempt(
    n: int, guid: str, status: int | None, *, age: float = 60.0, event: str = "issues"
) -> Any:
    return {
        "id": n,
        "guid": guid,
        "status_code": status,
        "event": event,
        "delivered_at": stamp(NOW - age),
    }


@dataclass
class Installation:
    comments_of: dict[int, list[Any]] = field(default_factory=dict)
    repos: list[Any] = field(default_factory=list)
    issues_of: dict[str, list[Any]] = field(default_factory=dict)
    events_of: dict[int, list[Any]] = field(default_factory=dict)
    remaining: int | None = None
    asked: list[str] = field(default_factory=list)
    broken: bool = False  # answers 404, as for a repository the App was removed from

    async def comments(
        self, owner: str, repo: str, number: int, *, since: float | None = None
    ) -> list[Any]:
        self.asked.append(f"comments {owner}/{repo}#{number} since {since}")
        if self.broken:
            raise GitHubError("GitHub GET … answered 404: Not Found", status=404)
        return self.comments_of.get(number, [])

    async def repositories(self) -> list[Any]:
        return self.repos

    async def file(self, owner: str, repo: str, path: str, *, ref: str) -> str | None:
        return None  # no project file: the trigger is `teaparty`

    async def labelled_issues(self, owner: str, repo: str, label: str) -> list[Any]:
        self.asked.append(f"issues {owner}/{repo} {label}")
        if self.remaining is not None:
            self.remaining -= 1
        return self.issues_of.get(repo, [])

    async def issue_events(self, owner: str, repo: str, number: int) -> list[Any]:
        return self.events_of.get(number, [])


@dataclass
class App:
    pages: list[list[Any]] = field(default_factory=list)
    redelivered: list[int] = field(default_factory=list)
    installs: dict[int, Installation] = field(default_factory=dict)

    async def deliveries(self, *, cursor: str | None = None) -> tuple[list[Any], str | None]:
        n = int(cursor or 0)
        return self.pages[n], (str(n + 1) if n + 1 < len(self.pages) else None)

    async def redeliver(self, attempt_id: int) -> None:
        self.redelivered.append(attempt_id)

    async def identity(self) -> Identity:
        return APP

    async def installations(self) -> list[Any]:
        return [{"id": n} for n in self.installs]

    async def installation(self, installation_id: int) -> Installation:
        return self.installs[installation_id]


@dataclass
class Records:
    subjects: dict[int, Subject] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)

    async def subject(self, job_id: int, forge: str) -> str | None:
        found = self.subjects.get(job_id)
        return None if found is None else found.to_json()

    async def job_for_key(self, key: str) -> object | None:
        return object() if key in self.jobs else None


@dataclass
class Office:
    gates: list[Gate] = field(default_factory=list)
    answered: dict[str, int] = field(default_factory=dict)
    records: Records = field(default_factory=Records)

    async def open_gates(self, job_id: int | None = None) -> list[Gate]:
        return self.gates

    async def answered_from(self, ref: str) -> int | None:
        return self.answered.get(ref)


@pytest.fixture
async def queue(tmp_path: Path) -> AsyncIterator[DeliveryQueue]:
    store = await Store.open(tmp_path / "teaparty.db")
    yield DeliveryQueue(store)
    await store.close()


def catchup(app: App, queue: DeliveryQueue) -> CatchUp:
    return CatchUp(app, queue, events=EVENTS, clock=lambda: NOW)  # type: ignore[arg-type]


async def test_only_events_no_attempt_delivered_are_asked_for_once(queue: DeliveryQueue) -> None:
    app = App(
        pages=[
            [
                attempt(9, "timed-out", None),
                attempt(8, "no-answer", 0),
                attempt(7, "refused", 401),  # the App's own answer: not asked again
                attempt(6, "later-fine", 200),
                attempt(5, "later-fine", 502),
                attempt(4, "not-handled", 502, event="push"),
            ],
            [
                attempt(3, "server-error", 503),
                attempt(2, "server-error", 502),  # the newest failed attempt is the one asked for
                attempt(1, "too-old", 502, age=HISTORY_S + 1),
            ],
            [attempt(0, "never-read", 502)],  # past the horizon: the pages stop
        ]
    )
    first = catchup(app, queue)
    assert sorted(await first.once()) == ["no-answer", "server-error", "timed-out"]
    assert sorted(app.redelivered) == [3, 8, 9]
    assert await first.once() == [], "under way: not asked for twice by one process"


async def test_what_the_store_received_is_not_asked_for(queue: DeliveryQueue) -> None:
    from orchestrator.api import Arrival

    await queue.record_all([Arrival("arrived-late", "issues", "labeled", b"{}")])
    app = App(pages=[[attempt(2, "arrived-late", 502), attempt(1, "lost", 502)]])
    assert await catchup(app, queue).once() == ["lost"]


SUBJECT = Subject("octo", "widgets", 5, 11, "main", "Add docs", "alice", "Alice", "teaparty")


def gate(gate_id: int, posted: str | None, *, job_id: int = 1) -> Gate:
    return unanswered_gate(gate_id, job_id, comment_ref=posted, asked_at=NOW - 30)


def comment(n: int, login: str, body: str = "yes", *, kind: str = "User") -> Any:
    return {"id": n, "body": body, "user": {"login": login, "type": kind}, "created_at": stamp(NOW)}


def backfill(app: App, office: Office, queue: DeliveryQueue, woken: list[int]) -> Backfill:
    repos = Repos(load_organisation(shipped_org_dir()))
    ports = SimpleNamespace(records=office.records, deliveries=queue)  # what it reads and writes
    return Backfill(app, office, ports, repos, on_stored=lambda: woken.append(1), clock=lambda: NOW)  # type: ignore[arg-type]


async def test_replies_after_a_posted_question_by_the_decider_become_deliveries(
    queue: DeliveryQueue,
) -> None:
    install = Installation(
        comments_of={
            5: [
                comment(90, "Alice", "before the question"),
                comment(100, APP.login, "the question itself"),
                comment(101, "bob", "not the decider"),
                comment(102, "alice", "yes, go"),  # logins compare in any case
                comment(103, "alice", "this one answered already"),
            ]
        }
    )
    office = Office(
        gates=[gate(1, "100"), gate(2, None, job_id=2), gate(3, "300", job_id=3)],
        answered={"github:comment:103": 7},
        records=Records({1: SUBJECT}),  # job 3 is not the App's: not read
    )
    woken: list[int] = []
    filler = backfill(App(installs={11: install}), office, queue, woken)
    assert await filler.answers() == ["catch-up:comment:102"]
    assert install.asked == [f"comments octo/widgets#5 since {NOW - 30 - 600}"]
    assert woken == [1]
    stored = await queue.due()
    command = parse_command(stored[0].event, json.loads(stored[0].body), app_login=APP.login)
    assert isinstance(command, CommentAdded)
    assert (command.repo.full_name, command.repo.installation_id) == ("octo/widgets", 11)
    assert (command.issue.number, command.comment_id, command.author.login) == (5, 102, "alice")
    assert command.body == "yes, go"
    assert await filler.answers() == [], "read again, nothing new is stored"
    assert woken == [1]


async def test_an_issue_out_of_reach_does_not_keep_the_others_from_being_read(
    queue: DeliveryQueue,
) -> None:
    gone = Installation(broken=True)
    here = Installation(comments_of={5: [comment(102, "alice")]})
    elsewhere = replace(SUBJECT, installation_id=12)
    office = Office(
        gates=[gate(1, "100"), gate(2, "100", job_id=2)],
        records=Records({1: SUBJECT, 2: elsewhere}),
    )
    filler = backfill(App(installs={11: gone, 12: here}), office, queue, [])
    assert await filler.answers() == ["catch-up:comment:102"]
    assert len(gone.asked) == 1


def repo(name: str, **more: Any) -> Any:
    return {
        "name": name,
        "full_name": f"octo/{name}",
        "owner": {"login": "octo"},
        "default_branch": "main",
        "private": False,
        "has_issues": True,
        **more,
    }


def issue(number: int, **more: Any) -> Any:
    return {
        "number": number,
        "title": f"Issue {number}",
        "body": "",
        "labels": [{"name": "teaparty"}],
        **more,
    }


def labelled(
    n: int, login: str, label: str = "teaparty", kind: str = "labeled", *, at: float = NOW - 60
) -> Any:
    return {
        "created_at": stamp(at),
        "id": n,
        "event": kind,
        "actor": {"login": login, "type": "User"},
        "label": {"name": label},
    }


async def test_open_issues_with_the_trigger_and_no_job_become_label_deliveries(
    queue: DeliveryQueue,
) -> None:
    install = Installation(
        repos=[repo("widgets"), repo("old", archived=True), repo("quiet", has_issues=False)],
        issues_of={
            "widgets": [
                issue(1),  # no job: its latest `labeled` event is the delivery
                issue(2, pull_request={"url": "…"}),  # a pull request: labels on them start nothing
                issue(3),  # has a job
                issue(4),  # no event says who added the label
                issue(6),  # labelled since the App started: its webhook is under way
            ],
            "old": [issue(9)],
            "quiet": [issue(9)],
        },
        events_of={
            1: [
                labelled(50, "bob"),
                labelled(51, "bob", kind="unlabeled"),
                labelled(52, "alice", "TeaParty"),
                labelled(53, "carol", "bug"),
            ],
            6: [labelled(60, "alice", at=NOW)],
        },
    )
    office = Office(records=Records(jobs={job_key("octo", "widgets", 3)}))
    woken: list[int] = []
    filler = backfill(App(installs={11: install}), office, queue, woken)
    assert await filler.labels() == ["catch-up:labeled:52"]
    assert install.asked == ["issues octo/widgets teaparty"], (
        "archived and issue-less repos are not read"
    )
    (stored,) = await queue.due()
    command = parse_command(stored.event, json.loads(stored.body), app_login=APP.login)
    assert isinstance(command, LabelAdded)
    assert (command.issue.number, command.label, command.sender.login) == (1, "TeaParty", "alice")
    assert command.repo.installation_id == 11
    assert await filler.labels() == []


async def test_a_label_scan_leaves_the_installation_a_reserve_of_its_rate_limit(
    queue: DeliveryQueue,
) -> None:
    install = Installation(repos=[repo("a"), repo("b"), repo("c")], remaining=RATE_RESERVE + 1)
    filler = backfill(App(installs={11: install}), Office(), queue, [])
    assert await filler.labels() == []
    assert install.asked == ["issues octo/a teaparty", "issues octo/b teaparty"]
