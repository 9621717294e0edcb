"""Webhook limits in process: the pure steps (head, HMAC in chunks, JSON), log escaping,
the server's settings, and the disk budget of unverified bodies.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI

from bot.demo import private_key_pem
from bot.errors import DeliveryError, SettingsError
from bot.handlers.payloads import HANDLED_EVENTS
from bot.server.endpoint import SPOOL_RAM_BYTES, create_app
from bot.server.http_server import MAX_HEAD_BYTES, DeadlineProtocol, app_server, client_of, peer_ip
from bot.server.webhooks import Signature, check_head, decode, shown, signature
from bot.settings import Settings
from orchestrator.store.deliveries import DeliveryQueue
from orchestrator.store.sqlite import Store

SECRET = "It's a Secret to Everybody"


def lower(fields: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in fields.items()}


def fields(body: bytes = b"{}", *, delivery: str = "d-1", event: str = "ping") -> dict[str, str]:
    return {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "x-github-event": event,
        "x-github-delivery": delivery,
        "x-hub-signature-256": signature(SECRET, body),
    }


def test_the_signature_fed_in_chunks_is_the_signature_of_the_whole() -> None:
    body = json.dumps({"zen": "x" * 100_000}).encode()
    head = check_head(fields(body), secret=SECRET, events=HANDLED_EVENTS)
    mac = Signature(SECRET, head)
    for start in range(0, len(body), 4096):
        mac.update(body[start : start + 4096])
    mac.check()
    wrong = Signature(SECRET, head)
    wrong.update(body[:-1])
    with pytest.raises(DeliveryError, match="does not match") as caught:
        wrong.check()
    assert caught.value.status == 401


@pytest.mark.parametrize(
    ("change", "status", "words"),
    [
        ({"content-length": str(26 * 1024 * 1024)}, 413, "over 25 MB"),
        ({"content-type": "text/plain"}, 415, "'text/plain'"),
        ({"x-hub-signature-256": ""}, 401, "no X-Hub-Signature-256"),
        ({"x-github-event": "deployment"}, 400, "'deployment'"),
    ],
)
def test_the_head_alone_refuses(change: dict[str, str], status: int, words: str) -> None:
    with pytest.raises(DeliveryError, match=words) as caught:
        check_head(fields() | change, secret=SECRET, events=HANDLED_EVENTS)
    assert (caught.value.status, caught.value.delivery_id) == (status, "d-1")


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b'{"a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nests too deeply"),
        (b'{"n": 1' + b"0" * 5_000 + b"}", "integer over 4300 digits"),
        (b'{"n": 1', "not JSON"),
        (b"\xff\xfe{}", "not JSON"),
    ],
)
def test_bodies_json_cannot_read_are_400_naming_the_delivery(body: bytes, words: str) -> None:
    head = check_head(fields(body), secret=SECRET, events=HANDLED_EVENTS)
    with pytest.raises(DeliveryError, match=words) as caught:
        decode(head, body)
    assert (caught.value.status, caught.value.delivery_id) == (400, "d-1")


def test_an_action_that_is_not_a_plain_name_is_not_kept() -> None:
    head = check_head(fields(), secret=SECRET, events=HANDLED_EVENTS)
    assert decode(head, b'{"action": "labeled"}').action == "labeled"
    assert decode(head, b'{"action": "x\\nINFO forged"}').action == ""


def test_shown_values_cannot_break_a_log_line() -> None:
    for value in ("a\nb", "a\rb", "a\x85b", "a\u2028b", "\x1b[31mred", "a\u202eb"):
        assert len(shown(value).splitlines()) == 1
        assert "\x1b" not in shown(value)
    assert shown("x" * 500) == repr("x" * 100) + "…"


def test_settings_bound_the_server() -> None:
    pem = private_key_pem()
    env = {"GITHUB_APP_ID": "1", "GITHUB_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": pem}
    default = Settings.from_env(env)
    assert (default.body_timeout_s, default.max_connections) == (10.0, 128)
    tight = {"TEAPARTY_BODY_TIMEOUT": "2.5", "TEAPARTY_MAX_CONNECTIONS": "9"}
    with socket.socket() as unbound:
        server = app_server(FastAPI(), Settings.from_env(env | tight), unbound)
    assert server.listener is unbound
    assert server.config.log_config is None  # uvicorn's records keep the App's one format
    assert server.config.limit_concurrency == 9
    assert server.config.h11_max_incomplete_event_size == MAX_HEAD_BYTES
    protocol = server.config.http
    assert isinstance(protocol, type)
    assert issubclass(protocol, DeadlineProtocol)
    assert protocol.deadline_s == 2.5
    for name, value in [("TEAPARTY_BODY_TIMEOUT", "0"), ("TEAPARTY_MAX_CONNECTIONS", "0")]:
        with pytest.raises(SettingsError, match=name):
            Settings.from_env(env | {name: value})


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "teaparty.db")
    yield opened
    await opened.close()


async def test_unverified_bodies_on_disk_are_bounded_and_the_bound_is_given_back(
    store: Store,
) -> None:
    budget = 600 * 1024
    app = create_app(
        DeliveryQueue(store), secret=SECRET, events=HANDLED_EVENTS, spool_disk_bytes=budget
    )
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as http:
        fits = json.dumps({"zen": "x" * (SPOOL_RAM_BYTES + 300 * 1024)}).encode()
        for n in range(3):  # each takes 300 KB of the 600: only if the last gave it back
            sent = fields(fits, delivery=f"fits-{n}") | {"x-hub-signature-256": "sha256=0"}
            response = await http.post("/webhook", content=fits, headers=sent)
            assert response.status_code == 401
        too_big = json.dumps({"zen": "x" * (SPOOL_RAM_BYTES + 700 * 1024)}).encode()
        response = await http.post("/webhook", content=too_big, headers=fields(too_big))
        assert response.status_code == 503
        assert response.headers["connection"] == "close"
        response = await http.post("/webhook", content=fits, headers=fields(fits))
        assert response.json() == {"delivery_id": "d-1", "status": "queued"}
    stored = await store.read(
        lambda tx: tx.execute("SELECT body FROM deliveries WHERE delivery_id = 'd-1'").fetchone()
    )
    assert stored == (fits,)  # spooled to disk, read back whole


def test_what_one_client_may_hold_and_whose_forwarded_address_is_believed() -> None:
    pem = private_key_pem()
    env = {"GITHUB_APP_ID": "1", "GITHUB_WEBHOOK_SECRET": "s", "GITHUB_APP_PRIVATE_KEY": pem}
    default = Settings.from_env(env)
    assert (default.max_connections_per_client, default.trusted_proxies) == (16, ())
    for overall, per_client in [("4", 2), ("20", 10), ("2", 1)]:  # room for another, always
        tight = Settings.from_env(env | {"TEAPARTY_MAX_CONNECTIONS": overall})
        assert tight.max_connections_per_client == per_client
    for per_client in ["128", "200"]:
        with pytest.raises(SettingsError, match=f"CLIENT={per_client}: must be below TEAPARTY_MAX"):
            Settings.from_env(env | {"TEAPARTY_MAX_CONNECTIONS_PER_CLIENT": per_client})
    with pytest.raises(SettingsError, match="TEAPARTY_MAX_CONNECTIONS=1: one client would hold"):
        Settings.from_env(env | {"TEAPARTY_MAX_CONNECTIONS": "1"})
    with pytest.raises(SettingsError) as bad:  # the overall bound's own problem, once
        Settings.from_env(env | {"TEAPARTY_MAX_CONNECTIONS": "x"})
    assert bad.value.problems == (
        "TEAPARTY_MAX_CONNECTIONS='x': must be a whole number from 1 to 100000",
    )
    with socket.socket() as unbound:
        server = app_server(FastAPI(), default, unbound)
    assert server.config.proxy_headers is False  # uvicorn would believe 127.0.0.1 by default
    proxies = {"TEAPARTY_TRUSTED_PROXIES": "10.0.0.5, 192.168.1.0/24"}
    trusting = Settings.from_env(env | proxies)
    assert trusting.trusted_proxies == ("10.0.0.5/32", "192.168.1.0/24")
    with socket.socket() as unbound:
        server = app_server(FastAPI(), trusting, unbound)
    assert server.config.proxy_headers is True
    assert server.config.forwarded_allow_ips == ["10.0.0.5/32", "192.168.1.0/24"]
    with pytest.raises(SettingsError, match="TEAPARTY_TRUSTED_PROXIES: 'proxy.internal'"):
        Settings.from_env(env | {"TEAPARTY_TRUSTED_PROXIES": "proxy.internal"})


def test_a_client_is_an_ipv4_address_or_an_ipv6_slash_64() -> None:
    assert client_of(ipaddress.ip_address("203.0.113.7")) == "203.0.113.7"
    one_host = [ipaddress.ip_address(f"2001:db8:1:2::{n:x}") for n in (1, 0xBEEF, 2**16 - 1)]
    assert {client_of(ip) for ip in one_host} == {"2001:db8:1:2::/64"}
    assert client_of(ipaddress.ip_address("2001:db8:1:3::1")) == "2001:db8:1:3::/64"
    assert peer_ip("::ffff:203.0.113.7") == ipaddress.ip_address("203.0.113.7")  # dual-stack
    assert peer_ip("2001:db8::1") == ipaddress.ip_address("2001:db8::1")
