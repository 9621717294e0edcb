"""`teaparty doctor` says which sandbox agents get here and what it guarantees."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from orchestrator.sandbox.confine import Sandbox


def test_doctor_names_the_mode_in_use_and_its_guarantees(
    tmp_path: Path, sandbox: Sandbox, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--home", str(tmp_path / "home")], environ={})
    out = capsys.readouterr().out
    assert out.startswith(f"sandbox in use: {sandbox.mode} ")
    assert code == (1 if sandbox.mode == "unavailable" else 0)
    for line in sandbox.guarantees:
        assert f"  - {line}" in out
    assert "TEAPARTY_HOME: " in out
    assert "mode 0o700" in out, "the state directory is created private"


def test_doctor_says_plainly_when_agents_run_unconfined(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--home", str(tmp_path)], environ={"TEAPARTY_SANDBOX": "off"})
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("sandbox in use: off (TEAPARTY_SANDBOX=off")
    assert "NONE: agents' processes run as" in out


def test_doctor_refuses_an_unknown_mode_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["doctor", "--home", str(tmp_path)], environ={"TEAPARTY_SANDBOX": "docker"})
    assert code == 1
    assert "TEAPARTY_SANDBOX='docker': use bwrap, landlock or off" in capsys.readouterr().err
