"""docs/architecture.md opens with a map of the tree: every folder it names exists, and every
package folder and top-level folder is named."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def mapped() -> set[str]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = text.split("## Map", 1)[1].split("```", 2)[1]
    return {m.group(1) for m in re.finditer(r"^(\S+/)\s", block, flags=re.M)}


def folders() -> set[str]:
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], check=True, capture_output=True, text=True
    ).stdout.split()
    top = {f"{path.split('/')[0]}/" for path in tracked if "/" in path and path[0] != "."}
    packages = {
        f"{path.parent.relative_to(ROOT).as_posix()}/"
        for package in ("bot", "orchestrator")
        for path in (ROOT / package).rglob("__init__.py")
    }
    return top | packages


def test_the_map_names_every_folder_and_only_folders_that_exist() -> None:
    assert mapped() == folders()
