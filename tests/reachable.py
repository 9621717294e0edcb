"""The engine's code and this Python's packages where another user can read them.

A test that runs part of the engine as an unprivileged uid cannot run it from the checkout
or the virtualenv when either lies in a directory only root can enter (a `mktemp -d`
clone, /root): they are linked (copied across file systems) into a directory whose parents
every user can search.
"""

from __future__ import annotations

import os
import shutil
import site
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_CODE = {
    "orchestrator": "orchestrator",
    "bot": "bot",
    "tests": "tests",
    "config": "teaparty_config",
}


def reachable_code(folder: Path, *names: str) -> Path:
    """`folder` (made, 0755) with the checkout's top-level packages `names` linked in (all
    of them by default); put it first on sys.path."""
    ignore = shutil.ignore_patterns("__pycache__")
    for name in names or tuple(_CODE):
        shutil.copytree(ROOT / name, folder / _CODE[name], copy_function=_link, ignore=ignore)
    _open_up(folder)
    return folder


def reachable_packages(folder: Path) -> list[str]:
    """This Python's site-packages linked under `folder`, without the editable install's
    finder (it would look in the checkout before the path, and fail there)."""
    ignore = shutil.ignore_patterns("__pycache__", "__editable__*")
    found = []
    for index, path in enumerate(p for p in site.getsitepackages() if p.startswith(sys.prefix)):
        copied = folder / f"site-{index}"
        shutil.copytree(path, copied, copy_function=_link, symlinks=True, ignore=ignore)
        found.append(str(copied))
    _open_up(folder)
    return found


def _open_up(folder: Path) -> None:
    for parent, dirs, _ in os.walk(folder):
        for name in dirs:
            os.chmod(os.path.join(parent, name), 0o755)
    os.chmod(folder, 0o755)


def _link(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError:  # another file system
        shutil.copy2(source, target)
