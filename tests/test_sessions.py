"""The job pages' session keys and cookies: made once, rotated weekly, retired after the
sessions they sealed expire; a sign-in's state taken once and only where it began."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from bot.errors import SettingsError
from bot.server.sessions import (
    KEY_FILE,
    ROTATE_S,
    SESSION_TTL,
    SIGNIN_TTL,
    Session,
    Sessions,
    load_keys,
)

NOW = 1_800_000_000.0


def lines(home: Path) -> list[str]:
    return (home / KEY_FILE).read_text().splitlines()


def test_keys_are_made_once_kept_private_and_rotated(tmp_path: Path) -> None:
    first = load_keys(tmp_path, now=NOW)
    assert len(lines(tmp_path)) == 1
    assert stat.S_IMODE((tmp_path / KEY_FILE).stat().st_mode) == 0o600
    sealed = Sessions(first, clock=lambda: NOW).seal(Session("alice", "ghu_t"))
    assert load_keys(tmp_path, now=NOW + 60) is not None
    assert len(lines(tmp_path)) == 1  # not yet a week old: kept
    later = NOW + ROTATE_S
    rotated = load_keys(tmp_path, now=later)
    assert len(lines(tmp_path)) == 2  # a new key in front, the old one still opens
    opened = Sessions(rotated, clock=lambda: NOW + 60).open(sealed)
    assert opened == Session("alice", "ghu_t")
    load_keys(tmp_path, now=later + SESSION_TTL + 1)
    assert len(lines(tmp_path)) == 1  # retired once what it sealed has expired
    assert "ghu_t" not in repr(opened)


def test_cookies_expire_and_are_not_readable(tmp_path: Path) -> None:
    clock = [NOW]
    sessions = Sessions(load_keys(tmp_path, now=NOW), clock=lambda: clock[0])
    sealed = sessions.seal(Session("alice", "ghu_secret"))
    assert "ghu_secret" not in sealed
    assert "alice" not in sealed
    assert sessions.open("not a cookie") is None
    clock[0] += SESSION_TTL + 1
    assert sessions.open(sealed) is None


def test_a_state_opens_once_within_ten_minutes_and_goes_nowhere_else(tmp_path: Path) -> None:
    clock = [NOW]
    sessions = Sessions(load_keys(tmp_path, now=NOW), clock=lambda: clock[0])
    state, cookie = sessions.begin("/jobs/3?x=1")
    assert sessions.finish(cookie, "other") is None
    assert sessions.finish(cookie, state) == "/jobs/3?x=1"
    assert sessions.finish(cookie, state) is None
    # a browser drops tabs and newlines from a URL (WHATWG): `/<tab>/host` is `//host`
    elsewhere_all = ("https://evil.example/", "//evil.example/", "/\\evil.example")
    elsewhere_all += ("/\t/evil.example", "/\n/evil.example", "/\r/evil.example")
    for elsewhere in elsewhere_all:
        state, cookie = sessions.begin(elsewhere)
        assert sessions.finish(cookie, state) == "/jobs"
    state, cookie = sessions.begin("/jobs")
    clock[0] += SIGNIN_TTL + 1
    assert sessions.finish(cookie, state) is None
    assert sessions.open(cookie) is None  # a sign-in's cookie is no session


@pytest.mark.parametrize("line", ["yesterday abc", "1800000000 not-a-key", "1800000000"])
def test_a_broken_key_file_names_its_line(tmp_path: Path, line: str) -> None:
    load_keys(tmp_path, now=NOW)
    kept = lines(tmp_path)
    (tmp_path / KEY_FILE).write_text("\n".join([*kept, line]) + "\n")
    with pytest.raises(SettingsError, match=rf"{KEY_FILE}:2: not a session key line"):
        load_keys(tmp_path, now=NOW)
    assert lines(tmp_path) == [*kept, line], "nothing rewritten"
