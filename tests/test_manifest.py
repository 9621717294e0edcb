"""`teaparty app-manifest`: the manifest, the registration page, and the code conversion."""

from __future__ import annotations

import json
import stat
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
import respx

from bot.cli import main
from bot.manifest import (
    DEFAULT_EVENTS,
    DEFAULT_PERMISSIONS,
    RegisteredApp,
    app_settings_url,
    build_manifest,
    form_html,
)

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


class Form(HTMLParser):
    """The action and the `manifest` field of the page's form, as a browser would read them."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.action = ""
        self.method = ""
        self.manifest = ""
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "form":
            self.action, self.method = values["action"] or "", values["method"] or ""
        if tag == "input" and values.get("name") == "manifest":
            self.manifest = values["value"] or ""


@pytest.fixture(autouse=True)
def _github_dot_com(monkeypatch: pytest.MonkeyPatch) -> None:
    """The command reads os.environ; start every test from GitHub.com."""
    monkeypatch.delenv("GITHUB_SERVER_URL", raising=False)
    monkeypatch.delenv("GITHUB_API_URL", raising=False)


def test_prints_the_manifest_with_exactly_the_permissions_and_events(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["app-manifest", "--webhook-url", HOOK]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith('{\n  "name"')  # indent 2
    assert json.loads(out) == {
        "name": "TeaParty",
        "url": "https://github.com",
        "hook_attributes": {"url": HOOK, "active": True},
        "public": False,
        "default_permissions": {
            "issues": "write",
            "pull_requests": "write",
            "contents": "write",
            "metadata": "read",
        },
        "default_events": ["issues", "issue_comment"],
    }


def test_name_homepage_public_and_redirect_url_are_options(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["--name", "Tea at Acme", "--url", "https://acme.example", "--public"]
    redirect = ["--redirect-url", "https://tea.example.com/registered"]
    assert main(["app-manifest", "--webhook-url", HOOK, *argv, *redirect]) == 0
    manifest = json.loads(capsys.readouterr().out)
    assert manifest["name"] == "Tea at Acme"
    assert manifest["url"] == "https://acme.example"
    assert manifest["public"] is True
    assert manifest["redirect_url"] == "https://tea.example.com/registered"


def test_the_constants_are_what_the_manifest_asks_for() -> None:
    manifest = build_manifest(webhook_url="http://localhost:8000/webhook")
    assert manifest["default_permissions"] == dict(DEFAULT_PERMISSIONS)
    assert manifest["default_events"] == list(DEFAULT_EVENTS)
    assert "redirect_url" not in manifest


@pytest.mark.parametrize(
    "url",
    [
        "https://tea.example.com/webhook",
        "https://tea.example.com/teaparty/webhook",
        "http://localhost:8000/webhook",
        "http://127.0.0.1/webhook",
    ],
)
def test_accepted_webhook_urls(url: str) -> None:
    assert build_manifest(webhook_url=url)["hook_attributes"] == {"url": url, "active": True}


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://tea.example.com/webhook", "must be https"),
        ("ftp://localhost/webhook", "must be https"),
        ("tea.example.com/webhook", "must be https"),
        ("https:///webhook", "has no host"),
        ("https://tea.example.com/", "must end in /webhook"),
        ("https://tea.example.com/webhook/", "must end in /webhook"),
        ("https://tea.example.com/hooks", "must end in /webhook"),
        ("https://[::1/webhook", "Invalid IPv6 URL"),
    ],
)
def test_bad_webhook_urls_are_usage_errors(
    url: str, problem: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["app-manifest", "--webhook-url", url]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"teaparty app-manifest: --webhook-url {url!r}: ")
    assert problem in err
    assert err.count("\n") == 1


def test_a_name_over_34_characters_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["app-manifest", "--webhook-url", HOOK, "--name", "T" * 34]) == 0
    capsys.readouterr()
    assert main(["app-manifest", "--webhook-url", HOOK, "--name", "T" * 35]) == 2
    assert capsys.readouterr().err == (
        f"teaparty app-manifest: --name {'T' * 35!r} is 35 characters; GitHub allows at most 34\n"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--webhook-url", HOOK, "--name", " "], "--name: must not be empty"),
        (["--webhook-url", HOOK, "--url", "acme.example"], "--url 'acme.example': not a full"),
        (["--webhook-url", HOOK, "--redirect-url", "/back"], "--redirect-url '/back': not a"),
        (["--webhook-url", HOOK, "--key-file", "k.pem"], "--key-file only applies to --convert"),
        (["--webhook-url", HOOK, "--org", "acme"], "--org only applies to --html"),
        (["--convert", CODE, "--public"], "--public does not apply to --convert"),
        (["--convert", CODE, "--redirect-url", "x"], "--redirect-url does not apply"),
        (["--convert", " "], "--convert: give the code from the redirect URL"),
    ],
)
def test_unusable_options_are_usage_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["app-manifest", *argv]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(f"teaparty app-manifest: {message}")


def test_webhook_url_or_convert_is_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["app-manifest"]) == 2
    assert "one of the arguments --webhook-url --convert is required" in capsys.readouterr().err


def test_html_page_posts_the_escaped_manifest_to_the_account_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "register.html"
    name = 'Tea "<b>" & co'
    assert main(["app-manifest", "--webhook-url", HOOK, "--name", name, "--html", str(page)]) == 0
    out, err = capsys.readouterr()
    text = page.read_text(encoding="utf-8")
    form = Form(text)
    assert form.method == "post"
    assert form.action.startswith("https://github.com/settings/apps/new?state=")
    state = form.action.removeprefix("https://github.com/settings/apps/new?state=")
    assert len(state) >= 16
    assert json.loads(form.manifest) == json.loads(out)
    assert "<b>" not in text  # the name cannot open a tag
    assert "&quot;name&quot;" in text
    assert "redirect_url" not in form.manifest
    assert err.count("\n") == 1
    assert err.startswith(f"Open {page} in a browser")
    assert "`teaparty app-manifest --convert CODE`" in err
    assert state in err


def test_html_page_for_an_organization_and_a_fresh_state_each_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "register.html"
    argv = ["app-manifest", "--webhook-url", HOOK, "--html", str(page), "--org", "acme-labs"]
    redirect = ["--redirect-url", "https://tea.example.com/registered"]
    assert main([*argv, *redirect]) == 0
    first = Form(page.read_text(encoding="utf-8"))
    assert main(argv) == 0
    second = Form(page.read_text(encoding="utf-8"))
    capsys.readouterr()
    action = "https://github.com/organizations/acme-labs/settings/apps/new?state="
    assert first.action.startswith(action)
    assert second.action.startswith(action)
    assert first.action != second.action
    assert json.loads(first.manifest)["redirect_url"] == "https://tea.example.com/registered"
    assert "redirect_url" not in json.loads(second.manifest)


@pytest.mark.parametrize(
    ("org", "action"),
    [
        ([], "https://ghe.example.com/settings/apps/new?state="),
        (["--org", "acme"], "https://ghe.example.com/organizations/acme/settings/apps/new?state="),
    ],
)
def test_html_page_targets_github_enterprise_server(
    org: list[str],
    action: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://ghe.example.com/")
    page = tmp_path / "register.html"
    assert main(["app-manifest", "--webhook-url", HOOK, "--html", str(page), *org]) == 0
    capsys.readouterr()
    assert Form(page.read_text(encoding="utf-8")).action.startswith(action)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--org", "acme/../../evil"], "--org 'acme/../../evil': not a GitHub organization"),
        (["--org=acme_labs"], "--org 'acme_labs': not a GitHub organization login"),
    ],
)
def test_html_refuses_an_org_that_is_not_a_login(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "register.html"
    assert main(["app-manifest", "--webhook-url", HOOK, "--html", str(page), *argv]) == 2
    assert capsys.readouterr().err.startswith(f"teaparty app-manifest: {message}")
    assert not page.exists()


def test_html_refuses_a_server_url_that_is_not_a_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "ghe.example.com")
    page = tmp_path / "register.html"
    assert main(["app-manifest", "--webhook-url", HOOK, "--html", str(page)]) == 2
    assert capsys.readouterr().err == (
        "teaparty app-manifest: GITHUB_SERVER_URL 'ghe.example.com': not a full http(s) URL\n"
    )


def test_html_into_a_missing_directory_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    page = tmp_path / "missing" / "register.html"
    assert main(["app-manifest", "--webhook-url", HOOK, "--html", str(page)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"teaparty app-manifest: --html {page}: cannot write: No such file or directory\n"


def test_form_html_escapes_every_attribute() -> None:
    manifest = {"name": "x", "url": 'https://e.example/"><script>'}
    page = form_html(manifest, action='https://github.com/settings/apps/new?state=a"b&c')
    form = Form(page)
    assert form.action == 'https://github.com/settings/apps/new?state=a"b&c'
    assert json.loads(form.manifest) == manifest
    assert "<script>" not in page


def test_convert_writes_the_key_0600_and_prints_only_the_settings(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    respx_mock: respx.MockRouter,
) -> None:
    monkeypatch.chdir(tmp_path)
    route = respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(201, json=CONVERSION))
    assert main(["app-manifest", "--convert", CODE]) == 0
    out, err = capsys.readouterr()
    key = tmp_path / "octoapp.private-key.pem"
    assert out.splitlines() == [
        "GITHUB_APP_ID=1",
        f"GITHUB_WEBHOOK_SECRET={WEBHOOK_SECRET}",
        f"GITHUB_APP_PRIVATE_KEY_PATH={key}",
    ]
    assert key.read_text() == PEM
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    for secret in ("PRIVATE KEY", "MIIEow", CLIENT_SECRET):
        assert secret not in out + err
    assert "https://github.com/apps/octoapp/installations/new" in err
    request = route.calls.last.request
    assert request.headers["accept"] == "application/vnd.github+json"
    assert "authorization" not in request.headers
    assert request.content == b""


def test_convert_uses_github_api_url_and_the_given_key_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    respx_mock: respx.MockRouter,
) -> None:
    monkeypatch.setenv("GITHUB_API_URL", "https://ghe.example.com/api/v3/")
    url = f"https://ghe.example.com/api/v3/app-manifests/{CODE}/conversions"
    respx_mock.post(url).mock(return_value=httpx.Response(201, json=CONVERSION))
    key = tmp_path / "keys dir" / "tea.pem"
    key.parent.mkdir()
    assert main(["app-manifest", "--convert", CODE, "--key-file", str(key)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"GITHUB_APP_PRIVATE_KEY_PATH='{key}'"  # quoted: a space
    assert stat.S_IMODE(key.stat().st_mode) == 0o600


def test_convert_refuses_an_existing_key_file_before_spending_the_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    key = tmp_path / "tea.pem"
    key.write_text("keep me")
    route = respx_mock.post(CONVERSIONS)
    assert main(["app-manifest", "--convert", CODE, "--key-file", str(key)]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"teaparty app-manifest: --key-file {key}: already exists; not overwriting it\n"
    assert key.read_text() == "keep me"
    assert not route.called


def test_convert_never_overwrites_the_default_key_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    respx_mock: respx.MockRouter,
) -> None:
    monkeypatch.chdir(tmp_path)
    key = tmp_path / "octoapp.private-key.pem"
    key.write_text("keep me")
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(201, json=CONVERSION))
    assert main(["app-manifest", "--convert", CODE]) == 1
    out, err = capsys.readouterr()
    assert key.read_text() == "keep me"
    assert out.splitlines() == ["GITHUB_APP_ID=1", f"GITHUB_WEBHOOK_SECRET={WEBHOOK_SECRET}"]
    assert err.startswith("teaparty app-manifest: octoapp.private-key.pem: already exists;")
    assert (
        "generate a new private key at https://github.com/organizations/github/settings/apps/octoapp"
        in err
    )
    assert err.count("\n") == 1
    assert "PRIVATE KEY-----" not in out + err


def test_a_404_is_one_line_naming_the_endpoint(
    capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    body = {"message": "Not Found", "documentation_url": "https://docs.github.com/rest"}
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(404, json=body))
    assert main(["app-manifest", "--convert", CODE]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err == (
        f"teaparty app-manifest: POST {CONVERSIONS}: 404 Not Found: "
        "the code is wrong, already used, or older than an hour\n"
    )


def test_a_422_reports_githubs_message(
    capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    body = {"message": "Validation Failed", "errors": ["Name is already\ntaken"]}
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(422, json=body))
    assert main(["app-manifest", "--convert", CODE]) == 1
    assert capsys.readouterr().err == (
        f"teaparty app-manifest: POST {CONVERSIONS}: 422 Unprocessable Entity: "
        "Validation Failed; Name is already taken\n"
    )


def test_a_5xx_without_json_reports_the_status(
    capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(502, text="<html>"))
    assert main(["app-manifest", "--convert", CODE]) == 1
    assert (
        capsys.readouterr().err == f"teaparty app-manifest: POST {CONVERSIONS}: 502 Bad Gateway\n"
    )


def test_a_network_failure_is_one_line(
    capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    respx_mock.post(CONVERSIONS).mock(side_effect=httpx.ConnectError("no route\nto host"))
    assert main(["app-manifest", "--convert", CODE]) == 1
    assert capsys.readouterr().err == (
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
    capsys: pytest.CaptureFixture[str],
    respx_mock: respx.MockRouter,
) -> None:
    monkeypatch.chdir(tmp_path)
    respx_mock.post(CONVERSIONS).mock(return_value=response)
    assert main(["app-manifest", "--convert", CODE]) == 1
    assert capsys.readouterr().err.startswith(
        f"teaparty app-manifest: POST {CONVERSIONS}: {problem}"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_null_webhook_secret_leaves_a_note_instead(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    respx_mock: respx.MockRouter,
) -> None:
    monkeypatch.chdir(tmp_path)
    body = {**CONVERSION, "webhook_secret": None}
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(201, json=body))
    assert main(["app-manifest", "--convert", CODE]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("# GITHUB_WEBHOOK_SECRET: GitHub returned none")


def test_the_code_is_quoted_into_the_path(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    respx_mock: respx.MockRouter,
) -> None:
    monkeypatch.chdir(tmp_path)
    url = "https://api.github.com/app-manifests/..%2Fuser/conversions"
    respx_mock.post(url).mock(return_value=httpx.Response(404))
    assert main(["app-manifest", "--convert", "../user"]) == 1
    assert url in capsys.readouterr().err


def test_convert_into_a_missing_directory_still_prints_the_id_and_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    key = tmp_path / "missing" / "tea.pem"
    body = {**CONVERSION, "owner": {"login": "octocat", "type": "User"}}
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(201, json=body))
    assert main(["app-manifest", "--convert", CODE, "--key-file", str(key)]) == 1
    out, err = capsys.readouterr()
    assert out.splitlines() == ["GITHUB_APP_ID=1", f"GITHUB_WEBHOOK_SECRET={WEBHOOK_SECRET}"]
    assert err == (
        f"teaparty app-manifest: {key}: cannot write: No such file or directory. "
        "The App 'octoapp' exists but its key was not saved: generate a new private key at "
        "https://github.com/settings/apps/octoapp\n"
    )
    assert "PRIVATE KEY-----" not in out + err


def test_a_422_without_details_reports_githubs_message(
    capsys: pytest.CaptureFixture[str], respx_mock: respx.MockRouter
) -> None:
    body = {"message": "Validation Failed", "errors": "not a list"}
    respx_mock.post(CONVERSIONS).mock(return_value=httpx.Response(422, json=body))
    assert main(["app-manifest", "--convert", CODE]) == 1
    assert capsys.readouterr().err == (
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
