"""Markdown as GitHub reads it, with where each part of it lies in the source.

GitHub renders comments with cmark-gfm; markdown-it-py parses the same CommonMark (with GFM
tables and strikethrough). Its inline tokens carry no source positions, which a rewrite of
the source needs, so `parse` finds them: each token is matched, in order, against the text
it was read from. Where that fails `MarkdownError` says so. Pure, no I/O.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any, NamedTuple

from markdown_it import MarkdownIt
from markdown_it.rules_inline import StateInline, image, link
from markdown_it.token import Token

from bot.errors import BotError

# Tokens read from their `markup` (the rest from their `content`); a link's `[` is fixed.
_MARKUP = frozenset(
    {"text_special", "em_open", "em_close", "strong_open", "strong_close", "s_open", "s_close"}
)
_BREAK = re.compile(r"[ \t]*\\?\n[ \t]*")
_CONTAINER = re.compile(r"(?:[ \t]*(?:>|[-+*](?=[ \t])|\d{1,9}[.)](?=[ \t])))*[ \t]*")


class MarkdownError(BotError):
    """A token could not be found where the parser read it (`found` says what and where)."""

    def __init__(self, found: str) -> None:
        super().__init__(f"Markdown token not found in its source: {found}")
        self.found = found


class Piece(NamedTuple):  # a tuple: there are tens of thousands in a long text
    """One inline token, read from `content[start:end]` of its `Inline`.

    For a link's closing token and an image, `tail` is where the part after the text
    starts: its `]` (then `(destination "title")`, `[label]` or nothing, up to `end`).
    """

    token: Token
    start: int
    end: int
    tail: int = -1


@dataclass(frozen=True)
class Inline:
    """A paragraph, heading or table cell: its inline content and where that lies."""

    content: str
    pieces: tuple[Piece, ...]
    anchors: tuple[tuple[int, int], ...]  # (content offset, source offset), ascending

    @cached_property
    def starts(self) -> list[int]:
        """Where each piece starts, in order."""
        return [piece.start for piece in self.pieces]

    def at(self, offset: int) -> int:
        """The index of the last piece that starts at or before `offset`."""
        return max(bisect.bisect_right(self.starts, offset) - 1, 0)

    def source(self, offset: int) -> int:
        """The source offset of a content offset."""
        at = bisect.bisect_right(self.anchors, (offset, 1 << 62)) - 1
        content, source = self.anchors[max(at, 0)]
        return source + max(offset - content, 0)


@dataclass(frozen=True)
class Lines:
    """A block taken as source lines: code, HTML, a link reference definition, a table's
    body row (with the number of columns its table has)."""

    token: Token
    first: int  # line numbers, from 0, both included
    last: int
    columns: int = 0


@dataclass(frozen=True)
class Source:
    """The text parsed, by lines."""

    text: str
    starts: list[int]  # where each line starts

    def start(self, line: int) -> int:
        """The offset of the start of `line`."""
        return self.starts[line]

    def end(self, line: int) -> int:
        """The offset of the end of `line`, before its line break."""
        return self.starts[line + 1] - 1 if line + 1 < len(self.starts) else len(self.text)

    def line(self, line: int) -> str:
        """The text of `line`."""
        return self.text[self.start(line) : self.end(line)]


def parse(text: str) -> tuple[list[Inline | Lines], Source]:
    """The leaf blocks of `text`, in order, and the text by lines.

    `text` has "\\n" line ends and no NUL (markdown-it would change both).
    """
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    lines = text.split("\n")
    env: dict[str, Any] = {}
    tokens = _MD.parse(text, env)
    blocks: list[Inline | Lines] = []
    cells: dict[int, int] = {}  # row line -> where its next cell is looked for
    columns, body = 0, False  # the table being read: its columns, and if in its body
    for i, token in enumerate(tokens):
        if token.type == "inline" and token.content:
            anchors = _anchors(tokens[i - 1], token, lines, starts, cells)
            blocks.append(Inline(token.content, _align(token), anchors))
        elif token.map and token.type in ("fence", "code_block", "html_block", "definition"):
            blocks.append(Lines(token, token.map[0], token.map[1] - 1))
        elif token.type == "thead_open":
            columns = 0
        elif token.type == "th_open":
            columns += 1
        elif token.type in ("tbody_open", "tbody_close"):
            body = token.type == "tbody_open"
        elif token.type == "tr_open" and body and token.map:
            blocks.append(Lines(token, token.map[0], token.map[0], columns))
    return blocks, Source(text, starts)


def _with_end(rule: Callable[[StateInline, bool], bool]) -> Callable[[StateInline, bool], bool]:
    """`rule` (link, image), noting on its last token where the whole construct ends.

    Where no `]` follows, no link can be: the rule is not tried (it would look for one at
    length, for every `[`, which takes seconds on `![[` repeated).
    """

    def noting(state: StateInline, silent: bool) -> bool:
        if _last_bracket(state.src) < state.pos or not rule(state, silent):
            return False
        if not silent:
            state.tokens[-1].meta["end"] = state.pos
        return True

    return noting


@lru_cache(maxsize=4)
def _last_bracket(src: str) -> int:
    return src.rfind("]")


_MD = MarkdownIt("commonmark", {"html": True, "inline_definitions": True})
_MD.enable(["table", "strikethrough"]).disable("text_join")  # keep escapes and entities apart
_MD.inline.ruler.at("link", _with_end(link))
_MD.inline.ruler.at("image", _with_end(image))


def _anchors(
    opener: Token, inline: Token, lines: list[str], starts: list[int], cells: dict[int, int]
) -> tuple[tuple[int, int], ...]:
    """Where the content of `inline` lies in the source, one anchor per line (or cell part)."""
    assert inline.map is not None  # block tokens always carry their lines
    first = inline.map[0]
    if opener.type in ("th_open", "td_open"):
        return _cell(inline.content, lines[first], starts[first], cells, first)
    if opener.type == "heading_open" and opener.markup.startswith("#"):
        line = lines[first]
        at = line.find(inline.content, line.index(opener.markup) + len(opener.markup))
        _found(at, inline.content, line)
        return ((0, starts[first] + at),)
    anchors, offset = [], 0
    for n, part in enumerate(inline.content.split("\n")):
        line, body = lines[first + n].rstrip(" \t"), part.lstrip(" \t")
        if not line.endswith(body):
            raise MarkdownError(f"{part!r} on line {first + n}")
        anchors.append((offset + len(part) - len(body), starts[first + n] + len(line) - len(body)))
        offset += len(part) + 1
    return tuple(anchors)


def _cell(
    content: str, line: str, start: int, cells: dict[int, int], row: int
) -> tuple[tuple[int, int], ...]:
    """A table cell's content in its row: a `|` in it was written `\\|`."""
    written = content.replace("|", "\\|")
    at = line.find(written, cells.get(row, 0))
    _found(at, written, line)
    cells[row] = at + len(written)
    anchors, shift = [(0, start + at)], 0
    for n, char in enumerate(content):
        if char == "|":
            shift += 1
            anchors.append((n, start + at + n + shift))
    return tuple(anchors)


def _found(at: int, part: str, line: str) -> None:
    if at < 0:
        raise MarkdownError(f"{part!r} in {line!r}")


def _align(inline: Token) -> tuple[Piece, ...]:
    """Each child token of `inline` with where it was read from, matched in order."""
    content, children = inline.content, inline.children or []
    pieces: list[Piece] = []
    pos = i = 0
    while i < len(children):
        token = children[i]
        if token.type == "text" and content.startswith(token.content, pos):  # most are
            pieces.append(Piece(token, pos, pos + len(token.content)))
            pos, i = pos + len(token.content), i + 1
        elif token.type == "link_open" and token.markup == "autolink":
            end = content.index(">", _expect(content, pos, "<")) + 1
            pieces += [Piece(token, pos, end), Piece(children[i + 1], pos + 1, end - 1)]
            pieces.append(Piece(children[i + 2], end, end))
            pos, i = end, i + 3
        else:
            piece = _piece(token, content, pos)
            pieces.append(piece)
            pos, i = piece.end, i + 1
    return tuple(pieces)


def _piece(token: Token, content: str, pos: int) -> Piece:
    """`token`, found at `pos` (or after spaces, which the parser skips)."""
    kind = token.type
    if kind == "text":
        if not content.startswith(token.content, pos):
            pos = _expect(content, _skip_spaces(content, pos), token.content)
        return Piece(token, pos, pos + len(token.content))
    if kind in ("softbreak", "hardbreak"):
        found = _BREAK.match(content, pos)
        if found is None:
            raise MarkdownError(f"{kind} at {content[pos : pos + 20]!r}")
        return Piece(token, pos, found.end())
    if kind == "code_inline":
        fence = token.markup
        closing = re.compile(rf"(?<!`){fence}(?!`)").search(
            content, _expect(content, pos, fence) + len(fence)
        )
        if closing is None:
            raise MarkdownError(f"code span at {content[pos : pos + 20]!r}")
        return Piece(token, pos, closing.end())
    if kind == "link_close":
        _expect(content, pos, "]")
        return Piece(token, pos, int(token.meta["end"]), tail=pos)
    if kind == "image":
        tail = _expect(content, pos, "![" + token.content + "]") + len(token.content) + 2
        return Piece(token, pos, int(token.meta["end"]), tail=tail)
    written = "[" if kind == "link_open" else token.markup if kind in _MARKUP else token.content
    return Piece(token, pos, _expect(content, pos, written) + len(written))


def _skip_spaces(content: str, pos: int) -> int:
    while pos < len(content) and content[pos] in " \t":
        pos += 1
    return pos


def _expect(content: str, pos: int, written: str) -> int:
    """`pos`, where `written` must start."""
    if not content.startswith(written, pos):
        raise MarkdownError(f"{written!r} at {content[pos : pos + 20]!r}")
    return pos


def container_prefix(line: str) -> str:
    """The block quote markers, list markers and indentation a line starts with."""
    found = _CONTAINER.match(line)
    return found[0] if found else ""


def is_paragraph(line: str) -> bool:
    """Whether `line` parses as one paragraph (not a heading, list item, fence, ...)."""
    tokens = _MD.parse(line)
    return not tokens or tokens[0].type == "paragraph_open"
