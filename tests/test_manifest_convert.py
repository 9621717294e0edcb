"""`teaparty app-manifest --convert`: the code exchanged for the App's key and settings."""

from __future__ import annotations

import resource
import signal
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from bot.cli import main
from bot.manifest_conversion import RegisteredApp, app_settings_url

HOOK = "https://tea.example.com/webhook"
CODE = "a180b1a3d263c81bc6441d7b990bae27d4c10679"
CONVERSIONS = f"https://api.github.com/app-manifests/{CODE}/conversions"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAuEPzOUE\n-----END RSA PRIVATE KEY-----\n"
CLIENT_SECRET = "1726be1638095a19edd134c77bde3aa2ece1e5d8"
WEBHOOK_SECRET = "e340154128314309424b7c8e90325147d99fdafa"
# Shaped like the 201 example of `apps/create-from-manifest` in GitHub's OpenAPI description.
CONVERSION: dict[str, Any] = {
    "id": 1,
    "slug": "octoapp",
    "node_id": "MDxOkludGVncmF0aW9uMQ==",
    "owner": {"login": "github", "id": 1, "type": "Organization", "site_admin": False},
    "name": "Octocat App",
    "description": "",
    "external_url": "https://example.com",
    "html_url": "https://github.com/apps/octoapp",
    "created_at": "2017-07-08T16:18:44-04:00",
    "updated_at": "2017-07-08T16:18:44-04:00",
    "permissions": {"metadata": "read", "contents": "read", "issues": "write"},
    "events": ["push", "pull_request"],
    "client_id": "Iv1.8a61f9b3a7aba766",
    "client_secret": CLIENT_SECRET,
    "webhook_secret": WEBHOOK_SECRET,
    "pem": PEM,
}


@pytest.fixture(autouse=True)
def _github_dot_com(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command reads os.environ; start every test from GitHub.com."""
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_API_URL", raising=False)


@dataclass(frozen=True)
class Ran:
    """What `teaparty app-manifest --convert` did: its exit code and output, and the route
    GitHub's conversion was mocked on."""

    code: int
    out: str
    err: str
    route: respx.Route


Convert = Callable[..., Ran]


@pytest.fixture
def convert(capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter) -> Convert:
    """Run `teaparty app-manifest --convert CODE` with `extra` arguments, GitHub answering
    `answer` at `url` (a response, or an error raised; None: not mocked, for the runs that
    must not call it)."""

    def run(
        answer: httpx.Response | Exception | None,
        *extra: str,
        url: str = CONVERSIONS,
        code: str = CODE,
    ) -> Ran:
        route = respx_mock.post(url)
        if isinstance(answer, Exception):
            route.mock(side_effect=answer)
        elif answer is not None:
            route.mock(return_value=answer)
        status = main(["app-manifest", "--convert", code, *extra])
        out, err = capsys.readouterr()
        return Ran(status, out, err, route)

    return run


def test_convert_writes_the_key_0600_and_prints_only_the_settings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    monkeypatch.chdir(tmp_path)
    ran = convert(httpx.Response(201, json=CONVERSION))
    assert ran.code == 0
    key = tmp_path / "octoapp.private-key.pem"
    assert ran.out.splitlines() == [
        "GITHUB_APP_ID=1",
        f"GITHUB_WEBHOOK_SECRET={WEBHOOK_SECRET}",
        f"GITHUB_APP_PRIVATE_KEY_PATH={key}",
        "GITHUB_CLIENT_ID=Iv1.8a61f9b3a7aba766",
        f"GITHUB_CLIENT_SECRET={CLIENT_SECRET}",
    ]
    assert key.read_text() == PEM
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert list(tmp_path.iterdir()) == [key]
    for secret in ("PRIVATE KEY", "MIIEow"):
        assert secret not in ran.out + ran.err
    assert CLIENT_SECRET not in ran.err
    assert ran.err.splitlines() == [
        "Wrote the private key to octoapp.private-key.pem (mode 0600). "
        "Install the App: https://github.com/apps/octoapp/installations/new",
        "The .env lines hold the App's secrets: keep their file private (`chmod 600 .env`).",
    ]
    request = ran.route.calls.last.request
    assert request.headers["accept"] == "application/vnd.github+json"
    assert "authorization" not in request.headers
    assert request.content == b""


def test_convert_uses_github_api_url_and_the_given_key_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example.com/api/v3/")
    url = f"https://ghe.example.com/api/v3/app-manifests/{CODE}/conversions"
    key = tmp_path / "keys dir" / "tea.pem"
    key.parent.mkdir()
    ran = convert(httpx.Response(201, json=CONVERSION), "--key-file", str(key), url=url)
    assert ran.code == 0
    assert ran.out.splitlines()[2] == f"GITHUB_APP_PRIVATE_KEY_PATH='{key}'"  # quoted: a space
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_convert_refuses_an_existing_key_file_before_spending_the_code(
    tmp_path: Path, convert: Convert
) -> None:
    key = tmp_path / "tea.pem"
    key.write_text("keep me")
    ran = convert(None, "--key-file", str(key))
    assert ran.code == 1
    assert ran.out == ""
    assert (
        ran.err == f"teaparty app-manifest: --key-file {key}: already exists; not overwriting it\n"
    )
    assert key.read_text() == "keep me"
    assert not ran.route.called


def test_convert_never_overwrites_the_default_key_file_and_keeps_the_new_key(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    monkeypatch.chdir(tmp_path)
    key = tmp_path / "octoapp.private-key.pem"
    key.write_text("keep me")
    ran = convert(httpx.Response(201, json=CONVERSION))
    assert ran.code == 0
    assert key.read_text() == "keep me"
    [new] = [path for path in tmp_path.iterdir() if path != key]
    assert new.name.startswith("new-app-")
    assert new.name.endswith(".private-key.pem")
    assert new.read_text() == PEM
    assert stat.S_IMODE(new.stat().st_mode) == 0o600
    assert ran.out.splitlines() == [
        "GITHUB_APP_ID=1",
        f"GITHUB_WEBHOOK_SECRET={WEBHOOK_SECRET}",
        f"GITHUB_APP_PRIVATE_KEY_PATH={new}",
        "GITHUB_CLIENT_ID=Iv1.8a61f9b3a7aba766",
        f"GITHUB_CLIENT_SECRET={CLIENT_SECRET}",
    ]
    assert ran.err.splitlines()[0] == (
        f"octoapp.private-key.pem: already exists; not overwriting it. The new key is {new.name}."
    )
    assert "PRIVATE KEY-----" not in ran.out + ran.err


def test_a_404_is_one_line_naming_the_endpoint(convert: Convert) -> None:
    body = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
    ran = convert(httpx.Response(404, json=body))
    assert ran.code == 1
    assert ran.out == ""
    assert ran.err == (
        f"teaparty app-manifest: POST {CONVERSIONS}: 404 Not Found: "
        "the code is wrong, already used, or older than an hour\n"
    )


def test_a_422_reports_githubs_message(convert: Convert) -> None:
    body = {"message": "Validation Failed", "errors": ["Name is already\ntaken"]}
    ran = convert(httpx.Response(422, json=body))
    assert ran.code == 1
    assert ran.err == (
        f"teaparty app-manifest: POST {CONVERSIONS}: 422 Unprocessable Entity: "
        "Validation Failed; Name is already taken\n"
    )


def test_a_5xx_without_json_reports_the_status(convert: Convert) -> None:
    ran = convert(httpx.Response(502, text="<html>"))
    assert ran.code == 1
    assert ran.err == f"teaparty app-manifest: POST {CONVERSIONS}: 502 Bad Gateway\n"


def test_a_network_failure_is_one_line(convert: Convert) -> None:
    ran = convert(httpx.ConnectError("no route\nto host"))
    assert ran.code == 1
    assert ran.err == (
        f"teaparty app-manifest: POST {CONVERSIONS}: ConnectError: no route to host\n"
    )


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        (httpx.Response(201, text="not json"), "the response is not JSON"),
        (httpx.Response(201, json=[1]), "the response is not a JSON object"),
        (httpx.Response(201, json={**CONVERSION, "pem": None}), "the response lacks id, pem"),
        (httpx.Response(201, json={**CONVERSION, "slug": "../x"}), "unusable slug '../x'"),
    ],
)
def test_an_unexpected_success_body_is_refused(
    response: httpx.Response,
    problem: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    monkeypatch.chdir(tmp_path)
    ran = convert(response)
    assert ran.code == 1
    assert ran.err.startswith(f"teaparty app-manifest: POST {CONVERSIONS}: {problem}")
    assert list(tmp_path.iterdir()) == []


def test_a_null_webhook_secret_leaves_a_note_instead(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    monkeypatch.chdir(tmp_path)
    body = {**CONVERSION, "webhook_secret": None, "client_secret": None}
    ran = convert(httpx.Response(201, json=body))
    assert ran.code == 0
    assert ran.out.splitlines()[1].startswith("# GITHUB_WEBHOOK_SECRET: GitHub returned none")
    assert ran.out.splitlines()[3].startswith("# GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET: GitHub")
    assert "chmod" not in ran.err


def test_the_code_is_quoted_into_the_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    monkeypatch.chdir(tmp_path)
    url = "https://api.github.com/app-manifests/..%2Fuser/conversions"
    ran = convert(httpx.Response(404), url=url, code="../user")
    assert ran.code == 1
    assert url in ran.err


def test_a_key_file_in_a_missing_directory_is_refused_before_spending_the_code(
    tmp_path: Path, convert: Convert
) -> None:
    key = tmp_path / "missing" / "tea.pem"
    ran = convert(None, "--key-file", str(key))
    assert ran.code == 1
    assert ran.out == ""
    assert ran.err == (
        f"teaparty app-manifest: --key-file {key}: cannot write: No such file or directory; "
        "the code is not spent\n"
    )
    assert not ran.route.called


def test_a_dangling_symlink_at_the_key_file_is_not_followed(
    tmp_path: Path, convert: Convert
) -> None:
    key = tmp_path / "tea.pem"
    key.symlink_to(tmp_path / "elsewhere.pem")
    ran = convert(None, "--key-file", str(key))
    assert ran.code == 1
    assert ran.err == (
        f"teaparty app-manifest: --key-file {key}: already exists; not overwriting it\n"
    )
    assert not (tmp_path / "elsewhere.pem").exists()
    assert not ran.route.called


def test_a_directory_that_cannot_take_the_key_is_found_before_spending_the_code(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    convert: Convert,
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # no file can be created here, even by root
    ran = convert(None)
    assert ran.code == 1
    assert ran.err == (
        "teaparty app-manifest: cannot write the private key in the current directory: "
        "No such file or directory (give --key-file PATH elsewhere); the code is not spent\n"
    )
    assert not ran.route.called


def test_a_failed_conversion_leaves_no_key_file(tmp_path: Path, convert: Convert) -> None:
    key = tmp_path / "tea.pem"
    ran = convert(httpx.Response(404), "--key-file", str(key))
    assert ran.code == 1
    assert "404 Not Found" in ran.err
    assert list(tmp_path.iterdir()) == []


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """Writes past `limit` bytes fail with EFBIG in this process, as on a full disk."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, previous)


def test_a_key_that_cannot_be_written_after_the_conversion_is_reported_with_what_to_do(
    tmp_path: Path, convert: Convert
) -> None:
    key = tmp_path / "tea.pem"
    body = {**CONVERSION, "owner": {"login": "octocat", "type": "User"}}
    with file_size_limit(10):
        ran = convert(httpx.Response(201, json=body), "--key-file", str(key))
    assert ran.code == 1
    assert ran.out.splitlines() == [
        "GITHUB_APP_ID=1",
        f"GITHUB_WEBHOOK_SECRET={WEBHOOK_SECRET}",
        "GITHUB_CLIENT_ID=Iv1.8a61f9b3a7aba766",
        f"GITHUB_CLIENT_SECRET={CLIENT_SECRET}",
    ]
    assert ran.err == (
        f"teaparty app-manifest: {key}: cannot write: File too large. "
        "The App 'octoapp' exists but its key was not saved: generate a new private key at "
        "https://github.com/settings/apps/octoapp\n"
    )
    assert not key.exists()
    assert "PRIVATE KEY-----" not in ran.out + ran.err


def test_a_422_without_details_reports_githubs_message(convert: Convert) -> None:
    body = {"message": "Validation Failed", "errors": "not a list"}
    ran = convert(httpx.Response(422, json=body))
    assert ran.code == 1
    assert ran.err == (
        f"teaparty app-manifest: POST {CONVERSIONS}: 422 Unprocessable Entity: Validation Failed\n"
    )


@pytest.mark.parametrize(
    ("org", "url"),
    [
        (None, "https://ghe.example.com/settings/apps/octoapp"),
        ("acme", "https://ghe.example.com/organizations/acme/settings/apps/octoapp"),
    ],
)
def test_app_settings_url_for_a_person_or_an_organization(org: str | None, url: str) -> None:
    app = RegisteredApp(
        1, "octoapp", "https://ghe.example.com/apps/octoapp", pem=PEM, webhook_secret=None, org=org
    )
    assert app_settings_url(app, server_url="https://ghe.example.com/") == url
    assert PEM not in repr(app)


def test_the_client_secret_never_shows_in_repr() -> None:
    app = RegisteredApp(
        1,
        "octoapp",
        "https://x",
        pem=PEM,
        webhook_secret=None,
        client_id="Iv1.a",
        client_secret="s3",
    )
    assert "s3" not in repr(app)
