"""`teaparty demo` runs the whole App loop offline and ends with the pull request."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.demo import run_demo

pytestmark = pytest.mark.timeout(120)


async def test_the_demo_ends_with_one_pull_request_that_closes_the_issue(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_demo(tmp_path, {"PATH": "/usr/bin:/bin"}, limit_s=90) == 0
    out = capsys.readouterr().out
    assert "answered 202" in out
    assert "👀 the App reacted" in out
    assert "(the demo decider) replied: yes" in out
    assert "pull request #2: Add a CHANGELOG (#1)" in out
    assert "Closes #1" in out
    assert "docs/requests/add-a-changelog.md" in out
    assert "schema violations: 0" in out
