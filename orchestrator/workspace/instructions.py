"""The repository's own instructions for agents, read at a commit the engine trusts.

Teams keep instructions for coding agents in files other tools read: `AGENTS.md` (in any
folder: the nearest one to a file wins), `CLAUDE.md`, `GEMINI.md`,
`.github/copilot-instructions.md` and `.github/instructions/**/*.instructions.md`, whose
front matter says which files they apply to (`applyTo: "**/*.py"`). They are read here from
the job's base commit in the engine's mirror, never from a tree an agent changes, so a
change cannot rewrite its own agents' rules. Each file is cut to a bound, and what is given
at once is bounded too; the agent is told where something was cut.

Which apply where:
- *repository-wide*: the root folder files, copilot-instructions, `.instructions.md` files
  that apply to every file, and the files a project adds (`instructions.files`);
- *scoped*: a folder file below the root applies to the files under its folder; an
  `.instructions.md` file to the paths its globs match.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath

import yaml

from orchestrator.workspace.git import GitError, git_bytes

log = logging.getLogger(__name__)

FOLDER_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md")
WIDE_FILES = (".github/copilot-instructions.md",)
SCOPED_DIR = ".github/instructions/"
SCOPED_SUFFIX = ".instructions.md"
FILE_BYTES = 12 * 1024  # of one file
GIVEN_BYTES = 32 * 1024  # of what one brief or prompt section gives
_FRONT_BYTES = 4096
_MODES = {b"100644", b"100755"}  # regular files: never a symlink's target or a submodule
_TOKEN = re.compile(r"[\w./@+-]+")
RULES = (
    "These are the repository's own instructions for coding agents, read from the job's "
    "base commit. Follow its conventions (style, commands, layout). The engine's rules "
    "outrank them: whatever they say about committing, pushing, branches or pull requests, "
    "the engine commits, merges and publishes, and you work as your brief says. Where two "
    "of them disagree, the one nearest the file wins."
)


@dataclass(frozen=True)
class Instruction:
    """One instruction file: its path, whom it applies to, and its text (cut to a bound)."""

    path: str
    folder: str | None = None  # a folder file: the folder ("" the root)
    applies: tuple[str, ...] = ()  # an .instructions.md file: its globs
    text: str = ""
    size: int = 0  # bytes as committed

    @property
    def wide(self) -> bool:
        """Whether it applies to every file of the repository."""
        if self.folder is not None:
            return self.folder == ""
        return any(glob in ("**", "**/*", "*") for glob in self.applies) or not self.applies

    def applies_to(self, path: str) -> bool:
        """Whether it applies to the file (or folder) at `path`, relative to the root."""
        if self.folder is not None:
            return self.folder == "" or path == self.folder or path.startswith(self.folder + "/")
        return any(_glob(glob).fullmatch(path) for glob in self.applies)


@dataclass(frozen=True)
class Instructions:
    """The instruction files of one commit, and the paths of its tree (to scope tasks)."""

    found: tuple[Instruction, ...] = ()
    files: frozenset[str] = frozenset()
    folders: frozenset[str] = frozenset()
    skipped: tuple[str, ...] = ()  # files not read, each with why

    def wide(self) -> tuple[Instruction, ...]:
        """What applies to the whole repository, root folder files first."""
        return tuple(i for i in self.found if i.wide)

    def scoped(self, paths: Iterable[str]) -> tuple[Instruction, ...]:
        """What applies to any of `paths` beyond the repository-wide ones, outermost first."""
        wanted = list(paths)
        found = [i for i in self.found if not i.wide and any(map(i.applies_to, wanted))]
        return tuple(sorted(found, key=_outermost_first))

    def named(self, text: str) -> tuple[str, ...]:
        """The paths of this tree (files, folders, or new files in a folder it has) that
        `text` names: what a task says it touches."""
        named: dict[str, None] = {}
        for token in _TOKEN.findall(text):
            path = token.rstrip(".,:;").removeprefix("./").rstrip("/")
            if not path or ".." in path.split("/"):
                continue
            parent = path.rsplit("/", 1)[0] if "/" in path else ""
            if path in self.files or path in self.folders:
                named[path] = None
            elif "/" in path and parent in self.folders and "." in path.rsplit("/", 1)[1]:
                named[path] = None  # a new file in a folder that exists
        return tuple(named)


def _outermost_first(instruction: Instruction) -> tuple[int, str]:
    """Glob-scoped files first, then folder files from the outermost in: the nearest last."""
    folder = instruction.folder
    return (-1 if folder is None else folder.count("/"), instruction.path)


@cache
def _glob(pattern: str) -> re.Pattern[str]:
    """A path glob as VS Code and Copilot read `applyTo`: `**` any folders, `*` and `?`
    within one name, `{a,b}` either."""
    out, i = [], 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "{" and (end := pattern.find("}", i)) > i:
            options = pattern[i + 1 : end].split(",")
            out.append("(?:" + "|".join(_glob(o).pattern for o in options) + ")")
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


def _globs(value: object) -> tuple[str, ...] | None:
    """`applyTo` as written: a string of comma-separated globs, or a list of them."""
    if isinstance(value, str):
        items: list[object] = list(_top_level_split(value))
    elif isinstance(value, list):
        items = value
    else:
        return None
    globs = tuple(str(g).strip().removeprefix("./").removeprefix("/") for g in items)
    return tuple(g for g in globs if g) or None


def _top_level_split(value: str) -> list[str]:
    """`value` split at the commas outside braces (`a/*.{ts,tsx}, b/*` is two globs)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(value):
        depth += {"{": 1, "}": -1}.get(char, 0)
        if char == "," and depth <= 0:
            parts.append(value[start:index])
            start = index + 1
    return [*parts, value[start:]]


def front_matter(text: str) -> tuple[dict[str, object], str]:
    """The YAML front matter of an .instructions.md file (bounded), and the text after it."""
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0 or end > _FRONT_BYTES:
        return {}, text
    try:
        loaded = yaml.safe_load(text[3:end])
    except yaml.YAMLError:
        return {}, text
    body = text[end + 4 :].split("\n", 1)[1] if "\n" in text[end + 4 :] else ""
    return (loaded if isinstance(loaded, dict) else {}), body


def cut(text: str, path: str, size: int, *, limit: int = FILE_BYTES) -> str:
    """`text` within `limit` bytes of UTF-8, with a note where it was cut."""
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore").rstrip()
    return f"{kept}\n[{path} is cut here: {limit // 1024} KiB of its {size // 1024} KiB shown]"


def _kind(path: str, extra: frozenset[str]) -> tuple[str | None, bool] | None:
    """(folder, is_scoped_file) for an instruction file's path, else None."""
    name = path.rsplit("/", 1)[-1]
    if name in FOLDER_FILES:
        return (path.rsplit("/", 1)[0] if "/" in path else ""), False
    if path.startswith(SCOPED_DIR) and path.endswith(SCOPED_SUFFIX):
        return None, True
    if path in WIDE_FILES or path in extra:
        return "", False
    return None


async def read_instructions(
    repo: Path, commit: str, *, extra: Iterable[str] = (), enabled: bool = True
) -> Instructions:
    """The instruction files at `commit` in `repo` (the engine's mirror), and its tree's paths.

    `extra` names further repository-wide files (the project's `instructions.files`);
    `enabled` False finds none but still lists the tree. A file that is not UTF-8 text, or
    an .instructions.md without `applyTo`, is skipped and named in `skipped`.
    """
    _, listing = await git_bytes(repo, "ls-tree", "-r", "-z", "--full-tree", commit)
    wanted = frozenset(extra)
    files: set[str] = set()
    candidates: list[tuple[str, str, str | None, bool]] = []
    for entry in listing.split(b"\0"):
        meta, _, raw = entry.partition(b"\t")
        if not raw:
            continue
        mode, kind, blob = meta.split(b" ")
        name = raw.decode(errors="replace")
        if kind == b"blob":
            files.add(name)
        found = _kind(name, wanted) if enabled and kind == b"blob" and mode in _MODES else None
        if found is not None:
            candidates.append((name, blob.decode(), *found))
    folders = {str(p) for f in files for p in PurePosixPath(f).parents if str(p) != "."}
    found_list: list[Instruction] = []
    skipped: list[str] = []
    for path, sha, folder, scoped in sorted(candidates, key=lambda c: (c[0].count("/"), c[0])):
        read = await _read_one(repo, path, sha, folder, scoped=scoped)
        if isinstance(read, str):
            skipped.append(read)
        elif read is not None:
            found_list.append(read)
    for path in sorted(wanted - files):
        skipped.append(f"{path} (named by instructions.files, not in the repository)")
    return Instructions(tuple(found_list), frozenset(files), frozenset(folders), tuple(skipped))


async def _read_one(
    repo: Path, path: str, sha: str, folder: str | None, *, scoped: bool
) -> Instruction | str | None:
    """One instruction file's blob; why it is skipped, or None when it is empty."""
    try:
        code, data = await git_bytes(repo, "cat-file", "blob", sha, check=False)
        text = data.decode() if code == 0 else None
    except (GitError, UnicodeDecodeError):
        text = None
    if text is None:
        return f"{path} (not UTF-8 text)"
    applies: tuple[str, ...] = ()
    if scoped:
        meta, text = front_matter(text)
        globs = _globs(meta.get("applyTo"))
        if globs is None:
            return f"{path} (no applyTo: it applies to nothing)"
        applies = globs
    if not text.strip():
        return None
    return Instruction(path, folder, applies, cut(text.strip(), path, len(data)), len(data))


def render(
    instructions: Iterable[Instruction],
    *,
    heading: str,
    limit: int = GIVEN_BYTES,
    skipped: Iterable[str] = (),
) -> str:
    """The text an agent is given: `heading`, the engine's rules, then each file whole until
    `limit` bytes, and the names of those left out for the bound. "" when there is nothing."""
    given: list[str] = []
    left: list[str] = []
    used = 0
    for instruction in instructions:
        block = f"### {instruction.path}{_scope_said(instruction)}\n{instruction.text}"
        size = len(block.encode())
        if used + size > limit:
            left.append(instruction.path)
            continue
        given.append(block)
        used += size
    if not given and not left:
        return ""
    parts = [heading, RULES, *given]
    if left:
        parts.append(
            f"[Not given, for the bound of {limit // 1024} KiB: {', '.join(left)}. Read them "
            "with read_file if your work needs them.]"
        )
    skipped = list(skipped)
    if skipped:
        parts.append("[Not read: " + "; ".join(skipped) + ".]")
    return "\n\n".join(parts)


def _scope_said(instruction: Instruction) -> str:
    if instruction.folder:
        return f" (for files under {instruction.folder}/)"
    if instruction.folder is None and not instruction.wide:
        return f" (for {', '.join(instruction.applies)})"
    return ""
