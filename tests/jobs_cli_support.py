"""`teaparty run` and `teaparty jobs` as real processes, and a state directory holding a done,
a failed, a parked and a cancelled job, each made by running it."""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_repo import ENV, git, make_repo

from bot.cli import main

CLI = [sys.executable, "-m", "bot.cli"]
USER = pwd.getpwuid(os.getuid()).pw_name  # who the processes run as: the default decider


def teaparty(
    *args: str, home: Path, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """Run `teaparty ARGS --home HOME` (`run` on the scripted model) to its end."""
    extra = ["--model", "scripted"] if args[0] == "run" else []
    return subprocess.run(
        [*CLI, *args, "--home", str(home), *extra],
        capture_output=True,
        text=True,
        env=ENV,
        cwd=cwd,
        input=stdin,
        timeout=90,
    )


def here(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`teaparty jobs ARGS --home HOME` in this process (its output read the same way)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["jobs", *args, "--home", str(home)], environ={})
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def jobs_json(*args: str, home: Path, in_process: bool = False) -> Any:
    """`teaparty jobs ARGS --json`, parsed; it must succeed."""
    if in_process:
        result = here(*args, "--json", home=home)
    else:
        result = teaparty("jobs", *args, "--json", home=home)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@dataclass(frozen=True)
class Store:
    """A state directory and the repository its jobs ran on."""

    home: Path
    repo: Path


DONE, FAILED, PARKED, CANCELLED = 1, 2, 3, 4


def four_jobs(root: Path) -> Store:
    """Jobs 1-4 on one repository: done, failed (its branch cannot be pushed), parked at its
    plan question, and cancelled while parked there."""
    repo, home = make_repo(root / "widgets"), root / "home"
    assert teaparty("run", "--title", "Add docs", "--yes", home=home, cwd=repo).returncode == 0
    git(repo, "branch", "teaparty/job-2-break-it/keep")  # the push of job 2's branch fails
    assert teaparty("run", "--title", "Break it", "--yes", home=home, cwd=repo).returncode == 1
    for title in ("Park it", "Drop it"):
        parked = teaparty("run", "--title", title, "--no-input", home=home, cwd=repo)
        assert parked.returncode == 4, parked.stderr
    cancelled = teaparty("jobs", "cancel", str(CANCELLED), home=home)
    assert cancelled.returncode == 0, cancelled.stderr
    return Store(home, repo)
