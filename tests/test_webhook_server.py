"""POST /webhook: verified, stored once before 202, refused clearly; the worker's retries."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from bot.errors import DeliveryError, GitHubError, NotYetError, RateLimitedError
from bot.github.subject import Subject
from bot.handlers.payloads import HANDLED_EVENTS, PayloadError
from bot.server import backfill
from bot.server.endpoint import create_app
from bot.server.webhooks import parse_delivery, signature, subject_of
from bot.server.worker import DeliveryWorker
from orchestrator.store import deliveries as inbox
from orchestrator.store.deliveries import DeliveryQueue, DeliveryRecord
from orchestrator.store.sqlite import Store, Tx

PAYLOADS = Path(__file__).parent / "payloads"
SECRET = "It's a Secret to Everybody"


def test_signature_matches_githubs_published_vector() -> None:
    assert signature(SECRET, b"Hello, World!") == (
        "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    )


def headers(body: bytes, *, event: str = "issues", delivery: str = "d-1") -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": signature(SECRET, body),
        "Content-Type": "application/json",
    }


def lower(h: dict[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in h.items()}


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"x-hub-signature-256": "sha256=" + "0" * 64}, 401, "does not match"),
        ({"x-hub-signature-256": ""}, 401, "no X-Hub-Signature-256"),
        ({"x-github-delivery": ""}, 400, "X-GitHub-Delivery"),
        ({"x-github-event": ""}, 400, "X-GitHub-Event"),
        ({"x-github-event": "deployment"}, 400, "'deployment' is not one this app subscribes"),
    ],
)
def test_parse_delivery_refuses_with_a_reason(
    change: dict[str, str], status: int, words: str
) -> None:
    body = (PAYLOADS / "issues.labeled.json").read_bytes()
    given = lower(headers(body)) | change
    with pytest.raises(DeliveryError, match=words) as caught:
        parse_delivery(given, body, secret=SECRET, events=HANDLED_EVENTS)
    assert caught.value.status == status


def test_malformed_json_is_refused_after_the_signature_holds() -> None:
    body = b'{"action": "labeled",'
    with pytest.raises(DeliveryError, match="not JSON") as caught:
        parse_delivery(lower(headers(body)), body, secret=SECRET, events=HANDLED_EVENTS)
    assert caught.value.status == 400
    array = b"[1, 2]"
    with pytest.raises(DeliveryError, match="not a JSON object"):
        parse_delivery(lower(headers(array)), array, secret=SECRET, events=HANDLED_EVENTS)


def test_unsigned_is_accepted_only_without_a_secret() -> None:
    body = (PAYLOADS / "ping.json").read_bytes()
    given = lower(headers(body, event="ping")) | {"x-hub-signature-256": ""}
    assert parse_delivery(given, body, secret=None, events=HANDLED_EVENTS).event == "ping"


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "teaparty.db")
    yield opened
    await opened.close()


@pytest.fixture
async def client(store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(DeliveryQueue(store), secret=SECRET, events=HANDLED_EVENTS)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        yield http


async def stored(store: Store) -> list[tuple[str, str, str]]:
    return await store.read(
        lambda tx: tx.execute("SELECT delivery_id, event, action FROM deliveries").fetchall()
    )


async def test_a_delivery_is_stored_once_and_redelivery_does_nothing(
    client: httpx.AsyncClient, store: Store
) -> None:
    body = (PAYLOADS / "issues.labeled.json").read_bytes()
    first = await client.post("/webhook", content=body, headers=headers(body))
    assert first.status_code == 202
    assert first.json() == {"delivery_id": "d-1", "status": "queued"}
    for _ in range(3):
        again = await client.post("/webhook", content=body, headers=headers(body))
        assert again.status_code == 202
        assert again.json()["status"] == "duplicate"
    assert await stored(store) == [("d-1", "issues", "labeled")]
    health = await client.get("/healthz")
    report = health.json()
    assert health.status_code == 200
    assert (report["ok"], report["pending_deliveries"], report["workers"]) == (True, 1, {})
    assert 0 <= report["oldest_pending_age_s"] < 60


@pytest.mark.parametrize(
    ("body", "change", "status"),
    [
        (b'{"zen": ', {}, 400),
        (b"{}", {"X-Hub-Signature-256": "sha256=" + "1" * 64}, 401),
        (b"{}", {"X-Hub-Signature-256": ""}, 401),
        (b"{}", {"X-GitHub-Delivery": ""}, 400),
        (b"{}", {"Content-Type": "application/x-www-form-urlencoded"}, 415),
    ],
)
async def test_bad_deliveries_get_4xx_and_are_not_stored(
    client: httpx.AsyncClient, store: Store, body: bytes, change: dict[str, str], status: int
) -> None:
    given = headers(body, event="ping") | change
    response = await client.post("/webhook", content=body, headers=given)
    assert response.status_code == status
    assert response.json()["message"]
    assert await stored(store) == []


async def test_a_30_mb_body_is_refused_with_413(client: httpx.AsyncClient, store: Store) -> None:
    body = b'{"pad": "' + b"x" * (30 * 1024 * 1024) + b'"}'
    response = await client.post("/webhook", content=body, headers=headers(body))
    assert response.status_code == 413

    async def stream() -> AsyncIterator[bytes]:  # no Content-Length: counted while read
        for _ in range(31):
            yield b"x" * (1024 * 1024)

    chunked = headers(b"") | {"X-GitHub-Delivery": "d-2"}
    response = await client.post("/webhook", content=stream(), headers=chunked)
    assert response.status_code == 413
    assert await stored(store) == []


class Flaky:
    """A handler failing as told, then succeeding."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.seen: list[str] = []

    async def __call__(self, delivery: inbox.Delivery) -> tuple[str, int | None]:
        self.seen.append(delivery.delivery_id)
        if self.errors:
            raise self.errors.pop(0)
        return "ok", None


async def put(store: Store, delivery_id: str, body: bytes = b"{}") -> None:
    await store.write(
        lambda tx: inbox.record(
            tx, delivery_id=delivery_id, event="issues", action="labeled", body=body, at=0.0
        )
    )


async def record_of(store: Store, delivery_id: str) -> DeliveryRecord:
    """The inbox's record of `delivery_id`, which it must hold."""
    record = await store.read(lambda tx: inbox.get(tx, delivery_id))
    assert record is not None
    return record


async def worked(store: Store, handler: Flaky, delivery_id: str) -> DeliveryWorker:
    """A worker over the inbox and `handler`, after one drain of `delivery_id` put in it."""
    worker = DeliveryWorker(DeliveryQueue(store), handler)
    await put(store, delivery_id)
    await worker.drain()
    return worker


async def make_due(store: Store) -> None:
    await store.write(lambda tx: tx.execute("UPDATE deliveries SET next_attempt_at = 0"))


async def test_a_failing_delivery_is_retried_with_backoff_then_succeeds(store: Store) -> None:
    handler = Flaky(GitHubError("GitHub answered 502", status=502))
    worker = await worked(store, handler, "d-1")
    record = await record_of(store, "d-1")
    assert (record.state, record.attempts, record.error) == ("pending", 1, "GitHub answered 502")
    assert await worker.drain() == 0  # not due yet: the backoff holds
    await make_due(store)
    await worker.drain()
    record = await record_of(store, "d-1")
    assert (record.state, record.outcome) == ("done", "ok")


async def test_a_delivery_failing_every_attempt_is_kept_failed_with_its_error(
    store: Store,
) -> None:
    handler = Flaky(*[GitHubError(f"boom {n}") for n in range(inbox.MAX_ATTEMPTS)])
    worker = DeliveryWorker(DeliveryQueue(store), handler)
    await put(store, "d-1")
    for _ in range(inbox.MAX_ATTEMPTS):
        await make_due(store)
        await worker.drain()
    record = await record_of(store, "d-1")
    assert (record.state, record.attempts) == ("failed", inbox.MAX_ATTEMPTS)
    assert record.error == f"boom {inbox.MAX_ATTEMPTS - 1}"
    body = await store.read(
        lambda tx: tx.execute("SELECT body FROM deliveries WHERE delivery_id = 'd-1'").fetchone()
    )
    assert body == (b"{}",)  # nothing lost: the delivery can be replayed


async def test_a_bad_payload_fails_at_once_and_a_rate_limit_waits_without_an_attempt(
    store: Store,
) -> None:
    handler = Flaky(PayloadError("issue.number", "issue.number: expected an integer"))
    await worked(store, handler, "bad")
    bad = await record_of(store, "bad")
    assert (bad.state, bad.attempts) == ("failed", 1)
    assert "issue.number" in (bad.error or "")

    limited = Flaky(RateLimitedError("rate limit", retry_at=4e9))
    await worked(store, limited, "slow")
    slow = await record_of(store, "slow")
    assert (slow.state, slow.attempts) == ("pending", 0)
    due_at = await store.read(inbox.next_due_at)
    assert due_at == 4e9

    undecided = Flaky(NotYetError("a question of job 7 is being posted", retry_at=3e9))
    await worked(store, undecided, "early")
    early = await record_of(store, "early")
    assert (early.state, early.attempts) == ("pending", 0)
    assert early.error == "a question of job 7 is being posted"
    assert await store.read(inbox.next_due_at) == 3e9


async def test_a_bug_in_a_handler_is_kept_as_a_failure_and_the_worker_goes_on(
    store: Store,
) -> None:
    handler = Flaky(KeyError("issue"))
    worker = DeliveryWorker(DeliveryQueue(store), handler)
    await put(store, "buggy")
    await put(store, "fine")
    assert await worker.drain() == 2
    buggy = await store.read(lambda tx: inbox.get(tx, "buggy"))
    fine = await store.read(lambda tx: inbox.get(tx, "fine"))
    assert buggy is not None
    assert fine is not None
    assert (buggy.state, buggy.error) == ("pending", "KeyError: 'issue'")
    assert fine.state == "done"


async def test_only_handled_deliveries_past_the_keep_window_are_forgotten(store: Store) -> None:
    for delivery_id in ("old-done", "new-done", "old-pending"):
        await put(store, delivery_id)
    await store.write(lambda tx: inbox.done(tx, "old-done", outcome="ok", at=0.0))
    await store.write(lambda tx: inbox.done(tx, "new-done", outcome="ok", at=inbox.KEEP_DONE_S))
    assert await store.write(lambda tx: inbox.prune(tx, at=inbox.KEEP_DONE_S + 1)) == 1
    left = await store.read(
        lambda tx: [r[0] for r in tx.execute("SELECT delivery_id FROM deliveries ORDER BY 1")]
    )
    assert left == ["new-done", "old-pending"]


async def test_a_second_delivery_of_the_same_comment_or_review_is_a_redelivery(
    store: Store,
) -> None:
    """A webhook and a catch-up read of one comment (or a runner's own event and the next
    run's reconciliation) carry different ids and the same subject: stored once."""

    def record(delivery_id: str, subject: str | None) -> Callable[[Tx], bool]:
        return lambda tx: inbox.record(
            tx,
            delivery_id=delivery_id,
            event="issue_comment",
            action="created",
            body=b"{}",
            at=0.0,
            subject=subject,
        )

    assert await store.write(record("webhook-guid", "comment:7"))
    assert not await store.write(record("catch-up:comment:7", "comment:7"))
    assert await store.write(record("catch-up:review:7", "review:7"))
    assert await store.write(record("a", None))
    assert await store.write(record("b", None))  # no subject: the id alone decides


async def test_a_read_mark_never_moves_back(store: Store) -> None:
    queue = DeliveryQueue(store)
    assert await queue.read_mark("github/octo/widgets") is None
    await queue.set_read_mark("github/octo/widgets", 200.0)
    await queue.set_read_mark("github/octo/widgets", 100.0)  # a run that started earlier
    assert await queue.read_mark("github/octo/widgets") == 200.0


@pytest.mark.parametrize(
    ("event", "payload", "subject"),
    [
        ("issue_comment", {"action": "created", "comment": {"id": 42}}, "comment:42"),
        ("pull_request_review", {"action": "submitted", "review": {"id": 9}}, "review:9"),
        ("issue_comment", {"action": "edited", "comment": {"id": 42}}, None),
        ("issue_comment", {"action": "created", "comment": {"id": "42"}}, None),
        ("issue_comment", {"action": "created", "comment": {"id": True}}, None),
        ("issue_comment", {"action": "created", "comment": {"id": 0}}, None),
        ("issue_comment", {"action": "created", "comment": None}, None),
        ("issues", {"action": "labeled", "label": {"id": 3}}, None),
        (
            "pull_request",
            {"action": "closed", "pull_request": {"id": 5, "closed_at": "2026-11-25T12:00:00Z"}},
            "pull-closed:5:2026-11-25T12:00:00Z",
        ),
        ("pull_request", {"action": "closed", "pull_request": {"id": 5}}, None),
        (
            "issues",
            {"action": "closed", "issue": {"id": 8, "closed_at": "2026-11-25T12:00:00Z"}},
            "issue-closed:8:2026-11-25T12:00:00Z",
        ),
        ("pull_request", {"action": "reopened", "pull_request": {"id": 5}}, None),
    ],
)
def test_what_a_delivery_is_about_is_named_only_from_a_real_id(
    event: str, payload: dict[str, object], subject: str | None
) -> None:
    assert subject_of(event, payload) == subject


@pytest.mark.parametrize(
    ("event", "name", "field"),
    [
        ("issue_comment", "issue_comment.created", "comment"),
        ("pull_request_review", "pull_request_review.submitted", "review"),
    ],
)
def test_a_webhook_and_a_catch_up_read_of_it_name_the_same_subject(
    event: str, name: str, field: str
) -> None:
    """GitHub's own payload (octokit's example) and the delivery the App makes from what it
    reads of the same comment or review carry one subject, so the store keeps one."""
    body = (PAYLOADS / f"{name}.json").read_bytes()
    webhook = parse_delivery(
        lower(headers(body, event=event)), body, secret=SECRET, events=HANDLED_EVENTS
    )
    payload = json.loads(body)
    subject = Subject(
        owner="o", repo="r", number=1, installation_id=1, default_branch="main", title="t",
        requester="a", decider="a", trigger_label="teaparty",
    )  # fmt: skip
    if field == "comment":
        read = backfill._comment_arrival(subject, payload["comment"])
    else:
        read = backfill._review_arrival(subject, payload["pull_request"], payload["review"])
    assert webhook.subject == read.subject == f"{field}:{payload[field]['id']}"
    assert webhook.delivery_id != read.delivery_id
