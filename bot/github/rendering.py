"""Inline Markdown as GitHub renders it: the text a reader sees, and where GitHub reads it
otherwise than markdown-it does.

A `View` is the text of one paragraph (heading, table cell) as it renders, each character
with the content range it came from, so a finding in it becomes an `Edit` of the source.
The rest is what GitHub's cmark-gfm does that markdown-it does not: autolinks that take in
what follows a bare URL, links and definitions read with unbalanced parentheses, footnotes.
Pure, no I/O.
"""

from __future__ import annotations

import bisect
import html
import re
import unicodedata
from dataclasses import dataclass, field

from bot.github.markdown import Inline, Piece

Edit = tuple[int, int, str]  # replace [start:end) with the text

# A mention, with what follows it up to a space: `@a@b` is one (in code, `@b` would be one).
# After `_` too: GitHub may read that `_` as emphasis, and then the `@` starts a text node.
_MENTION = re.compile(r"(?<![A-Za-z0-9])@[A-Za-z0-9][\w.@/-]*", re.ASCII)
_BARE_URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s\x00<>]*", re.IGNORECASE)
_LINK_START = re.compile(r"://|www\.", re.IGNORECASE)  # where GitHub may start an autolink
_LINK_RUN = re.compile(r"[^ \t\n\r\f\v<]*")  # and what it takes in (cmark-gfm autolink.c)
# In text, what could pair with what follows (the App's words too), or what GitHub may read
# as a link where markdown-it does not (cmark-gfm takes `[a](b(c)` for one).
_LITERAL = re.compile(r"`|<(?=[A-Za-z/!?]|$)|\](?=\()")
# `<` as an entity: GitHub's autolinks take a `\` after a bare URL in, leaving the `<` bare
ESCAPED = {"`": "\\`", "<": "&lt;", "]": "\\]"}
_LITERAL_HINT = re.compile(r"[`<\]]|://|www\.", re.IGNORECASE)  # what literals() rewrites
_DEFINITION = re.compile(r"^ {0,3}\[(?:[^\]\\]|\\.)*\]:", re.MULTILINE)
_CLOSERS = frozenset({"em_close", "strong_close", "s_close", "link_close"})


@dataclass
class View:
    """Inline text as it renders (NFKC), each character with its range in the content.

    Kept as parts, each with where it came from, and looked up only for what is found:
    there can be tens of thousands of parts in a long text.
    """

    parts: list[str] = field(default_factory=list)
    marks: list[int] = field(default_factory=list)  # where each part starts in the text
    spans: list[tuple[int, int, bool]] = field(default_factory=list)  # content range, 1:1
    size: int = 0

    def text(self, text: str, start: int) -> None:
        """Characters read one for one from the content at `start`."""
        if text.isascii() or unicodedata.is_normalized("NFKC", text):
            self._add(text, (start, start + len(text), True))
        else:
            for n, char in enumerate(text):
                self.atom(char, start + n, start + n + 1)

    def atom(self, text: str, start: int, end: int) -> None:
        """Characters read together from content[start:end] (an entity, an escape)."""
        self._add(unicodedata.normalize("NFKC", text), (start, end, False))

    def gap(self, text: str) -> None:
        """Characters that stand for markup: they are no part of the content."""
        self._add(text, (-1, -1, False))

    def string(self) -> str:
        """The text."""
        return "".join(self.parts)

    def start(self, at: int) -> int:
        """Where in the content the character at `at` of the text starts."""
        n = bisect.bisect_right(self.marks, at) - 1
        start, _, single = self.spans[n]
        return start + at - self.marks[n] if single else start

    def end(self, at: int) -> int:
        """Where in the content the character at `at` of the text ends."""
        n = bisect.bisect_right(self.marks, at) - 1
        start, end, single = self.spans[n]
        return start + at - self.marks[n] + 1 if single else end

    def _add(self, text: str, span: tuple[int, int, bool]) -> None:
        if text:
            self.parts.append(text)
            self.marks.append(self.size)
            self.spans.append(span)
            self.size += len(text)


def closing_views(inline: Inline) -> list[View]:
    """The text of `inline` read three ways, for closing keywords: markup left out
    (`**Fix**es`), code left out (`Fixes `x` #2` shows `Fixes #2` outside code), and
    markup as a space (`#2` before code is not `#2word`). An autolink's text is its URL."""
    views: list[View] = []
    for code, gap in ((True, ""), (False, ""), (True, " ")):
        view, content = View(), inline.content
        for piece in inline.pieces:
            kind = piece.token.type
            if kind == "text":
                view.text(content[piece.start : piece.end], piece.start)
            elif kind == "text_special":
                view.atom(piece.token.content, piece.start, piece.end)
            elif kind in ("softbreak", "hardbreak"):
                view.gap(" ")
            elif kind == "code_inline" and code:
                view.gap(gap)
                view.text(*_code_text(piece, content))
                view.gap(gap)
            else:
                view.gap(gap)
        views.append(view)
    return views


def after_closers(inline: Inline, at: int) -> int:
    """`at` moved past the closing markup right after it (`**`, `</b>`, a link's tail)."""
    starts = inline.starts
    n = bisect.bisect_left(starts, at)
    while n < len(starts) and starts[n] == at:
        piece = inline.pieces[n]
        kind = piece.token.type
        closer = kind in _CLOSERS or (kind == "html_inline" and piece.token.content[:2] == "</")
        if not closer and piece.end > piece.start:
            break
        at, n = piece.end, n + 1
    return at


def mentions(inline: Inline) -> list[Edit]:
    """Each @-mention in the text put in a code span; in a bare URL its `@` made `%40`."""
    view, content, autolink = View(), inline.content, False
    if "@" not in _shown(content):
        return []
    for piece in inline.pieces:
        kind = piece.token.type
        if kind in ("link_open", "link_close"):
            autolink = kind == "link_open" and piece.token.markup == "autolink"
        if autolink or kind not in ("text", "text_special"):
            view.gap("\x00")  # a new text node on GitHub: what follows may be a mention
        elif kind == "text":
            view.text(content[piece.start : piece.end], piece.start)
        else:
            view.atom(piece.token.content, piece.start, piece.end)
    shown = view.string()
    urls = [(url.start(), url.end()) for url in _BARE_URL.finditer(shown)]
    edits: list[Edit] = []
    for found in _MENTION.finditer(shown):
        at, end = found.start(), found.start() + len(found[0].rstrip("./"))
        url = bisect.bisect_right(urls, (at, 1 << 62)) - 1
        if url >= 0 and urls[url][1] > at:
            edits.append((view.start(at), view.end(at), "%40"))
        else:
            edits.append(_wrap(inline, view.start(at), view.end(at), view.end(end - 1)))
    return edits


def literals(piece: Piece, content: str) -> list[Edit]:
    """In a text token: what would pair with what follows (a backtick, `<`, `](`) escaped,
    and a bare URL that GitHub would extend past the token written as text (`https\\://`).

    GitHub's autolinks take in everything up to a space or `<` but trailing punctuation:
    backticks, brackets and escapes too, so code spans and links after them pair anew.
    """
    if not _LITERAL_HINT.search(piece.token.content):
        return []
    edits = [
        (piece.start + found.start(), piece.start + found.end(), ESCAPED[found[0]])
        for found in _LITERAL.finditer(piece.token.content)
    ]
    stop, beyond = -1, False  # the run a URL takes in, and whether it runs past the token
    for found in _LINK_START.finditer(piece.token.content):
        start = piece.start + found.start()
        if start >= stop:  # the first URL of a run decides for the run (linear time)
            run = _LINK_RUN.match(content, start)
            stop = run.end() if run else start
            beyond = _trimmed(content, start, stop) > piece.end
        if beyond:
            at = start if found[0] == "://" else start + 3
            edits.append((at, at + 1, "\\" + content[at]))
    return edits


def definitions(content: str) -> list[Edit]:
    """A line that GitHub may read as a definition shown as text: a footnote (GitHub drops
    one that nothing refers to; markdown-it knows none), or a link reference definition
    markdown-it does not take for one (cmark-gfm takes `[a]: b(c` too)."""
    return [(found.start(), found.start(), "\\") for found in _DEFINITION.finditer(content)]


def code(text: str) -> str:
    """`text` as a code span that shows it exactly."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    spaced = text.startswith(" ") and text.endswith(" ") and text.strip(" ") != ""
    pad = " " if spaced or text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _shown(content: str) -> str:
    """More than the text `content` shows (markup and all), in the form views compare."""
    return (
        unicodedata.normalize("NFKC", html.unescape(content))
        if not content.isascii() or ("&" in content)
        else content
    )


def _wrap(inline: Inline, start: int, name: int, end: int) -> Edit:
    """content[start:end], a mention whose name starts at `name`, in a code span.

    A code span cannot touch another (their backticks would run together): one before it
    takes the mention in; before one after it, only the `@` is code, which pings nobody too.
    """
    later = inline.pieces[inline.at(end - 1) + 1 : inline.at(end - 1) + 2]
    if later and later[0].token.type == "code_inline" and later[0].start == end:
        end = name
    first = inline.at(start)
    shown = "".join(
        inline.content[max(start, piece.start) : min(end, piece.end)]
        if piece.token.type == "text"
        else piece.token.content
        for piece in inline.pieces[first : inline.at(end - 1) + 1]
    )
    prior = inline.pieces[first - 1] if first > 0 else None
    if prior and prior.token.type == "code_inline" and prior.end == start:
        shown, start = prior.token.content + shown, prior.start
    return (start, end, code(shown))


def _code_text(piece: Piece, content: str) -> tuple[str, int]:
    """A code span's text as it renders, and where it starts in the content."""
    fence = len(piece.token.markup)
    raw = content[piece.start + fence : piece.end - fence].replace("\n", " ")
    strip = raw.startswith(" ") and raw.endswith(" ") and raw.strip() != ""
    return (raw[1:-1], piece.start + fence + 1) if strip else (raw, piece.start + fence)


def _trimmed(content: str, start: int, end: int) -> int:
    """The end of an autolink running to `end`, less what GitHub leaves out of it: trailing
    punctuation, an entity, an unbalanced `)` (cmark-gfm's autolink_delim)."""
    opening, closing = content.count("(", start, end), content.count(")", start, end)
    while end > start:
        last = content[end - 1]
        if last in "?!.,:*_~'\"":
            end -= 1
        elif last == ";":
            at = end - 2
            while at > start and content[at].isascii() and content[at].isalpha():
                at -= 1
            end = at if at < end - 2 and content[at] == "&" else end - 1
        elif last == ")" and closing > opening:
            end, closing = end - 1, closing - 1
        else:
            break
    return end
