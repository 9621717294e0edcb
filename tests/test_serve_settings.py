"""`teaparty serve`'s settings: every unusable variable named at once, no secret ever shown."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bot.demo import private_key_pem
from bot.errors import SettingsError
from bot.settings import Settings

PEM = private_key_pem()
SECRET = "hook-secret-6d1f"


def env(**changes: str) -> dict[str, str]:
    """A working environment, with `changes` (an empty value removes the variable)."""
    base = {"GITHUB_APP_ID": "4242", "GITHUB_APP_PRIVATE_KEY": PEM, "GITHUB_WEBHOOK_SECRET": SECRET}
    merged = base | changes
    return {name: value for name, value in merged.items() if value}


def problems(environ: dict[str, str]) -> tuple[str, ...]:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(environ, home=Path("/nonexistent"))
    return caught.value.problems


def test_a_working_environment() -> None:
    settings = Settings.from_env(env(GITHUB_API_URL="https://ghe.example.com/api/v3"))
    assert (settings.app_id, settings.private_key, settings.webhook_secret) == ("4242", PEM, SECRET)
    assert settings.api_url == "https://ghe.example.com/api/v3"
    assert settings.server_url == "https://github.com"
    assert PEM not in repr(settings)
    assert SECRET not in repr(settings)


def test_every_problem_is_listed_at_once_and_no_secret_is_shown() -> None:
    truncated = PEM[: len(PEM) // 2] + "\n-----END RSA PRIVATE KEY-----\n"
    found = problems(
        {
            "GITHUB_APP_ID": "abc",
            "GITHUB_APP_PRIVATE_KEY": truncated,
            "GITHUB_API_URL": "not-a-url",
            "GITHUB_SERVER_URL": "ftp://example.com",
            "TEAPARTY_STATUS_INTERVAL": "soon",
            "TEAPARTY_BODY_TIMEOUT": "0",
            "TEAPARTY_MAX_CONNECTIONS": "lots",
        }
    )
    assert found == (
        "GITHUB_APP_ID='abc': not an App id (a number: 'App ID' on the App's settings page)",
        "GITHUB_APP_PRIVATE_KEY: not a PEM private key that parses (truncated or damaged?)",
        "GITHUB_WEBHOOK_SECRET is not set (set TEAPARTY_INSECURE_NO_SIGNATURE=1 to accept "
        "unsigned deliveries, for local development only)",
        "GITHUB_API_URL='not-a-url': not an http(s) URL with a host",
        "GITHUB_SERVER_URL='ftp://example.com': not an http(s) URL with a host, or file:///PATH",
        "TEAPARTY_STATUS_INTERVAL='soon': not a number of seconds",
        "TEAPARTY_BODY_TIMEOUT='0': must be between 0.1 and 3600 seconds",
        "TEAPARTY_MAX_CONNECTIONS='lots': must be a whole number from 1 to 100000",
    )
    key_line = truncated.splitlines()[2]
    assert not any(key_line in problem for problem in found)


def test_nothing_set_names_each_required_variable() -> None:
    assert problems({}) == (
        "GITHUB_APP_ID is not set",
        "set GITHUB_APP_PRIVATE_KEY (PEM text) or GITHUB_APP_PRIVATE_KEY_PATH",
        "GITHUB_WEBHOOK_SECRET is not set (set TEAPARTY_INSECURE_NO_SIGNATURE=1 to accept "
        "unsigned deliveries, for local development only)",
    )


@pytest.mark.parametrize("app_id", ["abc", "0", "-1", "12 ", "4.2", "\u0661\u0662"])
def test_an_app_id_must_be_a_positive_number(app_id: str) -> None:
    assert problems(env(GITHUB_APP_ID=app_id)) == (
        f"GITHUB_APP_ID={app_id!r}: not an App id (a number: 'App ID' on the App's settings page)",
    )


def _ec_key() -> str:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def _encrypted_key() -> str:
    key = serialization.load_pem_private_key(PEM.encode(), password=None)
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    ).decode()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("not a key", "not a PEM private key that parses (truncated or damaged?)"),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
            "not a PEM private key that parses (truncated or damaged?)",
        ),
        (_ec_key(), "not an RSA private key (GitHub Apps sign with RSA)"),
        (_encrypted_key(), "the key is encrypted; give it as GitHub issued it (unencrypted)"),
    ],
)
def test_a_private_key_must_parse_as_an_rsa_key(text: str, problem: str) -> None:
    assert problems(env(GITHUB_APP_PRIVATE_KEY=text)) == (f"GITHUB_APP_PRIVATE_KEY: {problem}",)


def test_a_key_file_is_named_in_its_problem(tmp_path: Path) -> None:
    bad = tmp_path / "app.pem"
    bad.write_text(PEM[:200])
    found = problems(env(GITHUB_APP_PRIVATE_KEY="", GITHUB_APP_PRIVATE_KEY_PATH=str(bad)))
    assert found == (
        f"GITHUB_APP_PRIVATE_KEY_PATH={bad}: not a PEM private key that parses "
        "(truncated or damaged?)",
    )
    missing = tmp_path / "missing.pem"
    found = problems(env(GITHUB_APP_PRIVATE_KEY="", GITHUB_APP_PRIVATE_KEY_PATH=str(missing)))
    assert found == (
        f"GITHUB_APP_PRIVATE_KEY_PATH={missing}: cannot read: No such file or directory",
    )
    binary = tmp_path / "key.der"
    binary.write_bytes(b"\xff\xfe\x00")
    found = problems(env(GITHUB_APP_PRIVATE_KEY="", GITHUB_APP_PRIVATE_KEY_PATH=str(binary)))
    assert found == (f"GITHUB_APP_PRIVATE_KEY_PATH={binary}: cannot read: not a text file",)


def test_a_key_from_a_file_or_on_one_line_with_literal_newlines(tmp_path: Path) -> None:
    path = tmp_path / "app.pem"
    path.write_text(PEM)
    from_file = Settings.from_env(
        env(GITHUB_APP_PRIVATE_KEY="", GITHUB_APP_PRIVATE_KEY_PATH=str(path))
    )
    assert from_file.private_key == PEM
    one_line = PEM.replace("\n", "\\n")
    assert Settings.from_env(env(GITHUB_APP_PRIVATE_KEY=one_line)).private_key == PEM


@pytest.mark.parametrize(
    "url",
    ["https://api.github.com", "http://127.0.0.1:8080/", "https://ghe.example.com/api/v3"],
)
def test_api_urls_that_are_accepted(url: str) -> None:
    assert Settings.from_env(env(GITHUB_API_URL=url)).api_url == url


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("api.github.com", "'api.github.com'"),
        ("https://", "'https://'"),
        ("https://[::1", "'https://[::1'"),
        ("https://example.com:99999", "'https://example.com:99999'"),
        ("file:///srv/git", "'file:///srv/git'"),
        ("ftp://x:hunter2@example.com", "'ftp://…@example.com'"),
    ],
)
def test_api_urls_that_are_refused(url: str, shown: str) -> None:
    assert problems(env(GITHUB_API_URL=url)) == (
        f"GITHUB_API_URL={shown}: not an http(s) URL with a host",
    )


def test_the_server_url_may_be_a_local_directory_of_remotes() -> None:
    settings = Settings.from_env(env(GITHUB_SERVER_URL="file:///srv/git"))
    assert settings.server_url == "file:///srv/git"
    assert problems(env(GITHUB_SERVER_URL="file:relative")) == (
        "GITHUB_SERVER_URL='file:relative': not an http(s) URL with a host, or file:///PATH",
    )


def test_the_insecure_flag() -> None:
    unsigned = Settings.from_env(env(GITHUB_WEBHOOK_SECRET="", TEAPARTY_INSECURE_NO_SIGNATURE="1"))
    assert unsigned.insecure_no_signature
    assert not Settings.from_env(env(TEAPARTY_INSECURE_NO_SIGNATURE="0")).insecure_no_signature
    assert problems(env(TEAPARTY_INSECURE_NO_SIGNATURE="yes")) == (
        "TEAPARTY_INSECURE_NO_SIGNATURE='yes': must be 1 (accept unsigned deliveries) or 0",
    )


def test_job_pages_need_a_public_url_and_the_apps_client() -> None:
    off = Settings.from_env(env())
    assert (off.public_url, off.client_id, off.client_secret) == (None, None, None)
    on = Settings.from_env(
        env(
            TEAPARTY_PUBLIC_URL="https://tea.example.com/",
            GITHUB_CLIENT_ID="Iv1.abc",
            GITHUB_CLIENT_SECRET="client-secret-9f",
            TEAPARTY_PAGE_STREAMS="5",
        )
    )
    assert (on.public_url, on.client_id, on.page_streams) == (
        "https://tea.example.com",
        "Iv1.abc",
        5,
    )
    assert on.client_secret == "client-secret-9f"
    assert "client-secret-9f" not in repr(on)


def test_a_public_url_without_the_client_names_what_is_missing() -> None:
    found = problems(env(TEAPARTY_PUBLIC_URL="https://tea.example.com", GITHUB_CLIENT_ID="Iv1.a"))
    assert len(found) == 1
    assert "GITHUB_CLIENT_SECRET" in found[0]
    assert "GITHUB_CLIENT_ID" not in found[0]
    bad = problems(env(TEAPARTY_PUBLIC_URL="tea.example.com"))
    assert bad[0].startswith("TEAPARTY_PUBLIC_URL='tea.example.com': not an http(s) URL")
