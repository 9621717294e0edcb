"""Unified diffs as GitHub reads them for review comments: positions, hunks and moved lines.

A review comment's `position` counts lines down from a file's first `@@` header (the line just
below it is 1, later headers count too); its `diff_hunk` is the hunk's header through the
commented line. Pure: the text comes from `git diff` (bot.fakehub.git).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Hunk:
    """One `@@ -a,b +c,d @@` header and where it stands in its file's diff lines."""

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    index: int


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a diff, from its first hunk header on."""

    path: str
    lines: tuple[str, ...]
    hunks: tuple[Hunk, ...]
    right: Mapping[int, int] = field(default_factory=dict)  # new-side line -> position

    def locate(self, line: int) -> tuple[int, str] | None:
        """`(position, diff_hunk)` of new-side `line`, or None when the diff does not show it."""
        if (position := self.right.get(line)) is None:
            return None
        start = max(h.index for h in self.hunks if h.index < position)
        return position, "\n".join(self.lines[start : position + 1])

    def moved(self, line: int) -> int | None:
        """Where old-side `line` is on the new side; None when a hunk changed it."""
        shift = 0
        for hunk in self.hunks:
            last = hunk.old_start + hunk.old_count - 1
            if hunk.old_count == 0:  # lines inserted after old line `old_start`
                shift += hunk.new_count if hunk.old_start < line else 0
            elif hunk.old_start <= line <= last:
                return None
            elif last < line:
                shift += hunk.new_count - hunk.old_count
        return line + shift


def parse(text: str) -> dict[str, FileDiff]:
    """The files of `git diff` output by their new path (old path for a deleted file)."""
    return {diff.path: diff for diff in _files(text.split("\n"))}


def _files(lines: list[str]) -> Iterator[FileDiff]:
    starts = [i for i, line in enumerate(lines) if line.startswith("diff --git ")]
    for begin, end in zip(starts, [*starts[1:], len(lines)], strict=False):
        section = lines[begin:end]
        first = next((i for i, line in enumerate(section) if line.startswith("@@")), None)
        path = _path(section)
        if path is not None and first is not None:
            yield _file(path, tuple(section[first:]))


def _path(section: list[str]) -> str | None:
    old = new = None
    for line in section:
        if line.startswith("--- "):
            old = line[4:].removeprefix("a/")
        elif line.startswith("+++ "):
            new = line[4:].removeprefix("b/")
            break
    return old if new == "/dev/null" else new


def _file(path: str, lines: tuple[str, ...]) -> FileDiff:
    hunks: list[Hunk] = []
    right: dict[int, int] = {}
    new_line = 0
    for position, line in enumerate(lines):
        if found := _HUNK.match(line):
            a, b, c, d = found.groups()
            hunk = Hunk(int(a), int(b or 1), int(c), int(d or 1), position)
            hunks.append(hunk)
            new_line = hunk.new_start
        elif line[:1] in (" ", "+"):
            right[new_line] = position
            new_line += 1
    return FileDiff(path, lines, tuple(hunks), right)
