"""Task learnings as text: read from a lead's final reply, written as a file of the
repository, and read back from it. Pure.

A lead ends its reply with a `Learnings:` heading (or paragraph) and a list under it; each
item is one learning. That text is an agent's, so it is read strictly: Markdown parsed
(markdown-it), only the first paragraph of each item kept, as plain words and code spans
(no links, images or HTML), one line, control and format characters dropped, at most
`MAX_CHARS` characters, at most `MAX_PER_JOB` of them. Each has an id that is a hash of
its words, so the same learning from two jobs is one learning, and a source: where it
was learned (the issue or the local job, and its branch).

A job's learnings are a file of their own, `.teaparty/learnings/<job>.md`, one entry a
line: `- <text, Markdown-escaped> (`<id>`, <source>)`. A person may edit, remove or add
lines (a plain `- <text>` item is a learning too, its id the hash of its words); lines
that are no list item are ignored.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markdown_it.token import Token

LEARNINGS_DIR = ".teaparty/learnings"
MAX_PER_JOB = 5
MAX_CHARS = 200  # of one learning's text
MIN_CHARS = 8
MAX_SOURCE_CHARS = 120
ID_CHARS = 10
BY_A_PERSON = "added by a person"
_HEADING = re.compile(r"(?:task\s+)?learn(?:ings?|ed)\s*:?", re.IGNORECASE)
_ENTRY = re.compile(rf"^- (?P<text>.+) \(`(?P<id>[0-9a-f]{{{ID_CHARS}}})`, (?P<source>[^()`]+)\)$")
_ID = re.compile(rf"[0-9a-f]{{{ID_CHARS}}}")
_ESCAPED = re.compile(r"([\\*_\[\]<>&~`|#])")
_MD = MarkdownIt("commonmark")

HEADER = (
    "# Learnings\n\n"
    "What a TeaParty job learned in this repository, one line each. Once this file is merged, "
    "later tasks whose work is like it get the lines most relevant to them. Remove a line "
    "(or comment `/forget <id>` on an issue) to drop it.\n\n"
)


@dataclass(frozen=True)
class Learning:
    """One task learning: its id (a hash of its words), its text and where it came from."""

    entry_id: str
    text: str
    source: str

    def line(self) -> str:
        """The learning as the file holds it: one Markdown list item."""
        return f"- {_block_safe(escape(self.text))} (`{self.entry_id}`, {escape(self.source)})"

    def brief_line(self) -> str:
        """The learning as an agent's brief shows it."""
        return f"- {self.text} (id {self.entry_id}, from {self.source})"


def learning_id(text: str) -> str:
    """The id of a learning: a hash of its words (case and spacing aside)."""
    words = " ".join(text.casefold().split())
    return hashlib.sha256(words.encode()).hexdigest()[:ID_CHARS]


def is_id(text: str) -> bool:
    """Whether `text` reads as a learning's id."""
    return _ID.fullmatch(text) is not None


def from_reply(reply: str, *, source: str, limit: int = MAX_PER_JOB) -> tuple[Learning, ...]:
    """The learnings a lead's reply lists under its `Learnings:` heading (the last such)."""
    tokens = _MD.parse(reply)
    found: list[str] = []
    for start in _headings(tokens):
        found = _items(tokens, start)
    return _kept(found, source=clean_source(source), limit=limit)


def _headings(tokens: Sequence[Token]) -> Iterable[int]:
    """Where each top-level list that follows a `Learnings` heading or paragraph starts."""
    for n, token in enumerate(tokens[:-3]):
        if token.type != "inline" or token.level != 1:
            continue
        words = "".join(c.content for c in token.children or () if c.type == "text")
        closing = tokens[n + 1]
        after = tokens[n + 2]
        if _HEADING.fullmatch(words.strip()) and closing.type in (
            "heading_close",
            "paragraph_close",
        ):
            if after.type in ("bullet_list_open", "ordered_list_open") and after.level == 0:
                yield n + 2


def _items(tokens: Sequence[Token], start: int) -> list[str]:
    """The plain text of each item's first paragraph (or heading, or quoted line), in the
    list opened at `start`."""
    items: list[str] = []
    depth = tokens[start].level
    in_item = False
    for token in tokens[start + 1 :]:
        if token.level == depth and token.type.endswith("_list_close"):
            break
        if token.type == "list_item_open" and token.level == depth + 1:
            in_item = True
        elif token.type == "inline" and in_item:  # the item's first words, however nested
            items.append(plain(token.children or ()))
            in_item = False
    return items


def plain(children: Iterable[Token]) -> str:
    """Inline tokens as plain text: words and code spans (in backticks), nothing else."""
    parts: list[str] = []
    for child in children:
        if child.type == "text":
            parts.append(child.content.replace("`", "'"))
        elif child.type == "code_inline":
            code = " ".join(child.content.replace("`", "'").split())
            parts.append(f"`{code}`" if code else "")
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def _kept(texts: Iterable[str], *, source: str, limit: int) -> tuple[Learning, ...]:
    kept: dict[str, Learning] = {}
    for text in texts:
        cleaned = clean(text)
        if len(cleaned) >= MIN_CHARS and len(kept) < limit:
            found = Learning(learning_id(cleaned), cleaned, source)
            kept.setdefault(found.entry_id, found)
    return tuple(kept.values())


def clean(text: str, *, limit: int = MAX_CHARS) -> str:
    """`text` on one line: no control or format characters, spaces collapsed, clipped
    (never inside a code span: a cut span loses its backticks' meaning, so it is closed)."""
    printable = "".join(c if unicodedata.category(c)[0] != "C" else " " for c in text)
    line = " ".join(printable.split())
    if len(line) <= limit:
        return line
    cut = line[: limit - 1].rstrip()
    if cut.count("`") % 2:
        cut += "`"
    return cut + "…"


def clean_source(source: str) -> str:
    """A source as entries carry it: one line, no parentheses or backticks."""
    return clean(re.sub(r"[()`]", " ", source), limit=MAX_SOURCE_CHARS) or "a TeaParty job"


def escape(text: str) -> str:
    """Plain text (words and code spans) as Markdown that reads back as the same text."""
    parts = text.split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: none is a code span
        return _ESCAPED.sub(r"\\\1", text)
    return "`".join(part if n % 2 else _ESCAPED.sub(r"\\\1", part) for n, part in enumerate(parts))


def _block_safe(markdown: str) -> str:
    """Escaped text that a list item cannot read as a block of its own (a heading, a list,
    a quote, a rule) where it begins."""
    if match := re.match(r"\d{1,9}([.)])", markdown):
        return f"{markdown[: match.start(1)]}\\{markdown[match.start(1) :]}"
    return f"\\{markdown}" if markdown[:1] in ("-", "+", "=", ">", ":") else markdown


def render(learnings: Iterable[Learning]) -> str:
    """A job's learnings file."""
    return HEADER + "".join(f"{learning.line()}\n" for learning in learnings)


def read_file(text: str) -> tuple[Learning, ...]:
    """The entries of a learnings file, in order (lines that are none are skipped)."""
    found: list[Learning] = []
    for line in text.splitlines():
        entry = entry_of(line)
        if entry is not None:
            found.append(entry)
    return tuple(found)


def entry_of(line: str) -> Learning | None:
    """The entry one line of a learnings file holds, if it holds one: as the engine writes
    them, or a plain list item a person added (its id the hash of its words)."""
    match = _ENTRY.match(line.rstrip())
    if match is None:
        if not line.startswith("- "):
            return None
        text = clean(_inline_plain(line[2:]))
        return Learning(learning_id(text), text, BY_A_PERSON) if len(text) >= MIN_CHARS else None
    text = clean(_inline_plain(match.group("text")))
    source = clean_source(_inline_plain(match.group("source")))
    if len(text) < MIN_CHARS:
        return None
    return Learning(match.group("id"), text, source)


def without(text: str, forgotten: frozenset[str]) -> str | None:
    """A learnings file with the entries of `forgotten` ids removed, else as it was; None
    when no entry is left."""
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if (e := entry_of(line)) is None or e.entry_id not in forgotten]
    if not any(entry_of(line) is not None for line in kept):
        return None
    return "".join(kept)


def _inline_plain(markdown: str) -> str:
    tokens = _MD.parseInline(markdown)
    return plain(tokens[0].children or ()) if tokens else ""
