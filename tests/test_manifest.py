"""`teaparty app-manifest`: the manifest, the registration page, and the code conversion."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from bot.cli import main
from bot.fakehub.checks import CHECK_ROUTES
from bot.fakehub.routes import grants
from bot.fakehub.state import DEFAULT_APP_PERMISSIONS
from bot.manifest import (
    DEFAULT_EVENTS,
    DEFAULT_PERMISSIONS,
    build_manifest,
    form_html,
)

HOOK = "https://tea.example.com/webhook"
CODE = "a180b1a3d263c81bc6441d7b990bae27d4c10679"  # a code from the redirect URL


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
        "callback_urls": ["https://tea.example.com/auth/callback"],
        "public": False,
        "default_permissions": {
            "issues": "write",
            "pull_requests": "write",
            "contents": "write",
            "metadata": "read",
            "checks": "write",
            "actions": "write",
        },
        "default_events": [
            "issues",
            "issue_comment",
            "pull_request",
            "pull_request_review",
            "pull_request_review_comment",
            "check_suite",
        ],
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


def test_the_manifest_grants_every_call_ci_rounds_make_and_no_more_than_they_need() -> None:
    """Each CI call (bot/github/ci.py), with the permission the stand-in holds it to: logs
    need actions: read, a job re-run actions: write, suites and annotations checks: read, a
    rerequest checks: write; the manifest's level is the highest one needed."""
    needed: dict[str, str] = {}
    for operation, (names, level) in CHECK_ROUTES.needs.items():
        assert any(grants(DEFAULT_PERMISSIONS.get(name), level) for name in names), operation
        for name in names:
            if grants(level, needed.get(name, "read")):
                needed[name] = level
    assert needed == {"checks": "write", "actions": "write"}
    assert {k: DEFAULT_PERMISSIONS[k] for k in needed} == needed


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


def test_the_sign_in_callback_sits_beside_the_webhook() -> None:
    built = build_manifest(webhook_url="https://tea.example.com/bot/webhook")
    assert built["callback_urls"] == ["https://tea.example.com/bot/auth/callback"]


def test_the_stand_in_installs_the_app_with_what_the_manifest_asks_for() -> None:
    """The demo and every test that names no permissions run the App as an installer who
    granted the manifest would: a permission added to one and not the other shows here."""
    assert dict(DEFAULT_APP_PERMISSIONS) == dict(DEFAULT_PERMISSIONS)
