"""Agent text made safe to post on GitHub: what a model wrote reaches people as plain words.

An agent may follow any instruction hidden in an issue, so everything it wrote (the pull
request's title and body, the tracking comment's plan, result and errors, gate questions and
options) passes `Outbound.block` or `Outbound.inline` before the App posts it. The text is
parsed as GitHub parses it (bot.github.markdown) and its source rewritten where the parse
shows something that would act or hide; the rest is posted as written:

- an @-mention (`@login`, `@org/team`, however written: `&#64;x`, `\\@x`, fullwidth) outside
  code and autolinks is put in a code span, so it pings nobody; in a bare URL its `@` is
  written `%40`. The App's own mentions (the decider in a gate) are composed outside;
- a closing keyword before `#N`, `GH-N`, `owner/repo#N` or an issue URL acts only on the
  job's own issue: before any other it reads `Fixes (reference only) #999`. Keywords are
  found in the text as it renders: entities decoded, emphasis and HTML tags ignored, any
  space (no-break, fullwidth) a space; in code too;
- nothing stays hidden: an HTML comment (and `<?…>`, `<!…>`) becomes `(HTML comment
  removed)`; any other raw HTML is shown as text (`\\<details>`), but for images from GitHub
  and `<br>`; a link reference definition is shown as text, its links written inline; a
  link's title and a code fence's info string past its first word are shown as text;
  invisible characters go, also when written as entities;
- an image is kept only when it loads from GitHub (github.com, *.githubusercontent.com, the
  GITHUB_SERVER_URL host, or a relative URL); any other becomes a link;
- a code fence left open is closed, so the App's words after agent text stay words.

Rewriting repeats until a parse finds nothing to rewrite; text that does not settle in a few
rounds, or that the parse cannot place, is posted as a code block. Pure, no I/O.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from urllib.parse import urlsplit

from markdown_it.token import Token

from bot.github.markdown import (
    Inline,
    Lines,
    MarkdownError,
    Piece,
    Source,
    container_prefix,
    is_paragraph,
    parse,
)
from bot.github.rendering import (
    ESCAPED,
    Edit,
    after_closers,
    closing_views,
    definitions,
    literals,
    mentions,
)
from bot.github.sanitizer import sanitize, strip_invisible

NEUTRAL = " (reference only)"  # between a keyword and a reference it may not close
COMMENT_NOTE = "(HTML comment removed)"
GITHUB_IMAGE_HOSTS = ("github.com", "githubusercontent.com")  # and their subdomains

_ROUNDS = 5
_KEYWORD = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REF = (
    rf"(?:(?:(?P<owner>{_NAME})/(?P<repo>{_NAME}))?#(?P<num>\d+)|GH-(?P<gh>\d+)"
    rf"|(?P<url>https?://[^\s/<>()]+/{_NAME}/{_NAME}/(?:issues|pull)/\d+))"
)
_ANY_REF = re.sub(r"\?P<\w+>", "", _REF)  # the same, unnamed, to repeat in a list
_CLOSING = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<keyword>{_KEYWORD})(?![A-Za-z0-9])(?P<sep>\s*:?\s*)"
    rf"(?P<refs>{_REF}(?:\s*(?:,|\band\b|&)\s*{_ANY_REF})*)(?![A-Za-z0-9_])",
    re.IGNORECASE,
)
_ONE_REF = re.compile(_REF, re.IGNORECASE)
_MEDIA_TAG = r"<(?:img|image|source|video|audio|input|embed|object|iframe)\b"
_MEDIA_OPEN = re.compile(_MEDIA_TAG, re.IGNORECASE)
_URL_ATTRIBUTE = re.compile(
    r"""\b(?:src|srcset|poster|data|href)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", re.IGNORECASE
)
_LINE_END = re.compile(r"[ \t]*(?:\n|$)")
_LINE_BREAK = re.compile(r"<br\s*/?>", re.IGNORECASE)
_HTML_PART = re.compile(  # a comment, declaration or instruction, or a tag (quotes kept whole)
    r"""<!--.*?(?:-->|\Z)|<[!?][^>]*>?|</?[A-Za-z](?:[^<>"']|"[^"]*"|'[^']*')*>?""", re.DOTALL
)
_MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_URL_NOISE = re.compile(r"[\x00-\x20]")  # browsers drop tabs and newlines inside a URL
_INFO = re.compile(r"[\w+#.-]*")  # a code fence's info string GitHub shows all of: a language
_LEADING = re.compile(r"^(?:[ \t]*(?:>|[-+*](?=[ \t])|\d{1,9}[.)](?=[ \t])))*[ \t]*", re.M)
_LIST_MARKER = re.compile(r"[-+*]|\d{1,9}[.)]")
_NESTED = frozenset({"link_open", "image", "html_inline"})


@dataclass(frozen=True)
class Outbound:
    """Agent text bound for one job's issue, the one issue its closing keywords may close."""

    owner: str
    repo: str
    number: int
    server_url: str = "https://github.com"

    def block(self, text: str) -> str:
        """Agent text (Markdown, any length) made safe to post."""
        text = _prepare(text)
        settled = self._settled(text)
        return code_block(self._neutral(text)) if settled is None else settled

    def inline(self, text: str, *, limit: int | None = None) -> str:
        """Agent text for one line (a title, a list item): `block`, its lines joined.

        With `limit`, the text is shortened before it is made safe until the result fits, so
        no cut falls inside what the rules wrote (a backticked mention, say).
        """
        line = self._line(text)
        while limit is not None and len(line) > limit:
            text = text[: min(limit, len(text) * 3 // 4)]
            line = self._line(text)
        return line

    def github_url(self, url: str) -> bool:
        """Whether `url`, read as a browser reads it, loads from GitHub (relative URLs do)."""
        url = html.unescape(_MARKDOWN_ESCAPE.sub(r"\1", url.strip().strip("<>")))
        url = _URL_NOISE.sub("", url).replace("\\", "/")
        try:
            parts = urlsplit(url)
            host = (parts.hostname or "").rstrip(".")
        except ValueError:
            return False
        if not parts.scheme and not parts.netloc:
            return True
        if parts.scheme not in ("http", "https"):
            return False
        own = (urlsplit(self.server_url).hostname or "").lower()
        hosts = (*GITHUB_IMAGE_HOSTS, own) if own else GITHUB_IMAGE_HOSTS
        return any(host == h or host.endswith("." + h) for h in hosts)

    def _line(self, text: str) -> str:
        line = " ".join(_prepare(text).split("\n")).strip()
        if line and not is_paragraph(line):  # a heading, list item, fence...: its marker as text
            line = re.sub(r"^(\d*)([!-/:-@\[-`{-~])", r"\1\\\2", line)
        settled = self._settled(line)
        if settled is None or "\n" in settled:
            return code_span(self._neutral(line))
        return settled

    def _settled(self, text: str) -> str | None:
        """`text` rewritten until its parse shows nothing to rewrite; None if it does not settle."""
        for _ in range(_ROUNDS):
            try:
                edits = self._edits(text)
            except MarkdownError:
                return None
            if not edits:
                return text
            text = _apply(text, edits)
        return None

    def _edits(self, text: str) -> list[Edit]:
        blocks, source = parse(text)
        edits: list[Edit] = []
        for block in blocks:
            if isinstance(block, Inline):
                edits += self._inline(block)
            elif block.token.type == "definition":
                edits += _definition(block, source)
            elif block.token.type == "html_block":
                edits += self._html_block(block, source)
            elif block.token.type == "tr_open":
                edits += _row(block, source)
            else:
                edits += self._code(block, source)
        return edits

    # inline content: paragraphs, headings, table cells

    def _inline(self, inline: Inline) -> list[Edit]:
        edits: list[Edit] = []
        opened: Token | None = None  # the link whose text this is
        for piece in inline.pieces:
            token = piece.token
            if token.type == "link_open":
                opened = token
            elif token.type == "link_close":
                if opened is not None and opened.markup != "autolink":
                    edits += self._link(piece, opened, inline.content)
                opened = None
            elif token.type == "image":
                edits += self._link(piece, token, inline.content)
            elif token.type == "text" and (opened is None or opened.markup != "autolink"):
                edits += literals(piece, inline.content)
            elif token.type == "text_special" and token.info == "entity":
                edits += _replaced(piece, strip_invisible(token.content))
            elif token.type == "html_inline":
                edits += _replaced(piece, self._html_inline(piece, inline.content))
        edits += mentions(inline) + self._closings(inline) + definitions(inline.content)
        return [(inline.source(start), inline.source(end), new) for start, end, new in edits]

    def _html_inline(self, piece: Piece, content: str) -> str:
        """Raw HTML in a paragraph; a tag alone on a later line as text, for GitHub starts an
        HTML block there when the line is lazy (`> a` then `<br>`), where markdown-it
        reads on."""
        tag = self._html(piece.token.content)
        alone = content[piece.start - 1 : piece.start] == "\n"
        if alone and tag == piece.token.content and _LINE_END.match(content, piece.end):
            return _as_text(tag)
        return tag

    def _html(self, tag: str) -> str:
        """Raw HTML as posted: hidden parts noted, images from GitHub kept, the rest (media
        from elsewhere too) shown as text."""
        if tag.startswith(("<!", "<?")):  # a comment, declaration or instruction shows nothing
            return COMMENT_NOTE
        if _LINE_BREAK.fullmatch(tag):
            return tag
        if not _MEDIA_OPEN.match(tag):
            return _as_text(tag)
        urls = [
            candidate.split()[0]
            for value in _URL_ATTRIBUTE.findall(tag)
            for candidate in html.unescape(value.strip("\"'")).split(",")
            if candidate.strip()
        ]
        from_github = all(self.github_url(url) for url in urls)
        return tag if from_github and tag[1:4].lower() == "img" else _as_text(tag)

    def _link(self, piece: Piece, token: Token, content: str) -> list[Edit]:
        """An image from elsewhere loses its `!`; a title or a reference is written inline."""
        target = str(token.attrGet("src" if token.type == "image" else "href") or "")
        title = str(token.attrGet("title") or "")
        edits: list[Edit] = []
        nested = any(part.type in _NESTED for part in token.children or ())
        if token.type == "image" and (nested or not self.github_url(target)):
            edits.append((piece.start, piece.start + 1, ""))  # its alt drops a link's parts
        if title or not content.startswith("](", piece.tail):
            shown = f' "{" ".join(title.split())}"' if title else ""
            edits.append((piece.tail, piece.end, f"](<{target}>){shown}"))
        return edits

    def _closings(self, inline: Inline) -> list[Edit]:
        """NEUTRAL after each closing keyword, in the text as it renders, whose references are
        not all the own issue."""
        points = {
            after_closers(inline, view.end(found.end("keyword") - 1))
            for view in closing_views(inline)
            for found in _CLOSING.finditer(view.string())
            if not self._all_own(found)
        }
        return [(at, at, NEUTRAL) for at in sorted(points)]

    # blocks taken as lines: code, HTML

    def _code(self, block: Lines, source: Source) -> list[Edit]:
        """Closing keywords in code too (cheap, and GitHub's reading of code is not ours)."""
        first, last, edits = block.first, block.last, []
        if block.token.type == "fence":
            edits += _fence(block, source)
            closed = last > first and _closes(block.token.markup, source.line(last))
            first, last = first + 1, last - 1 if closed else last
        for n in range(first, last + 1):
            start = source.start(n)
            edits += [
                (start + found.end("keyword"), start + found.end("keyword"), NEUTRAL)
                for found in _CLOSING.finditer(source.line(n))
                if not self._all_own(found)
            ]
        return edits

    def _html_block(self, block: Lines, source: Source) -> list[Edit]:
        """An HTML block is kept only when it is images from GitHub; else it becomes text."""
        start = source.start(block.first)
        raw = source.text[start : source.end(block.last)]
        edits = [
            (start + part.start(), start + part.end(), new)
            for part in _HTML_PART.finditer(raw)
            if (new := self._html(part[0])) != part[0]
        ]
        if not edits and not _HTML_PART.sub("", raw).strip():
            return []  # images from GitHub and line breaks only
        first, opening = source.line(block.first), _HTML_PART.search(raw)
        if opening is None or self._html(opening[0]) != opening[0]:
            return edits  # its first tag is rewritten: the rest is read as Markdown
        if _HTML_PART.sub("", first).strip() or not all(
            self._html(tag) == tag for tag in _HTML_PART.findall(first)
        ):
            return [(start + opening.start(), start + opening.end(), _as_text(opening[0]))]
        # its first line, images from GitHub, stays an HTML block: end the block there
        blank = re.sub("[^>]", " ", container_prefix(first)).rstrip()
        return [*edits, (source.end(block.first), source.end(block.first), "\n" + blank)]

    # closing keywords: the own issue only

    def _neutral(self, text: str) -> str:
        """`text` with NEUTRAL after every closing keyword not all for the own issue."""
        return _CLOSING.sub(
            lambda found: (
                found[0]
                if self._all_own(found)
                else found["keyword"] + NEUTRAL + found[0][len(found["keyword"]) :]
            ),
            text,
        )

    def _all_own(self, match: re.Match[str]) -> bool:
        return all(self._own(ref) for ref in _ONE_REF.finditer(match["refs"]))

    def _own(self, ref: re.Match[str]) -> bool:
        """Whether a reference names the job's own issue."""
        if ref["url"]:
            parts = urlsplit(ref["url"])
            path = parts.path.strip("/").split("/")
            own_host = (urlsplit(self.server_url).hostname or "").lower()
            same_host = own_host != "" and parts.hostname == own_host
            return same_host and len(path) == 4 and self._is(path[0], path[1], path[3])
        if ref["gh"]:
            return self._is(self.owner, self.repo, ref["gh"])
        return self._is(ref["owner"] or self.owner, ref["repo"] or self.repo, ref["num"])

    def _is(self, owner: str, repo: str, number: str) -> bool:
        return (owner.lower(), repo.lower(), int(number)) == (
            self.owner.lower(),
            self.repo.lower(),
            self.number,
        )


def code_span(text: str) -> str:
    """`text`, sanitised, on one line as inline code that nothing inside it can end early."""
    text = " ".join(sanitize(text).split("\n"))
    if not text.strip():
        return "` `"
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def code_block(text: str, info: str = "") -> str:
    """`text` as a fenced code block (info string `info`) that no line of it can end early:
    the fence is longer than any run of backticks inside."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{text}\n{fence}"


def _prepare(text: str) -> str:
    """Invisible characters out, lines normalised, tabs in line starts made spaces (so each
    line of a block's content is the end of its source line, as `parse` needs)."""
    text = sanitize(text, keep_comments=True)
    return _LEADING.sub(lambda found: found[0].expandtabs(4), text) if "\t" in text else text


def _apply(text: str, edits: list[Edit]) -> str:
    """`text` with `edits` made; one that overlaps an earlier one waits for the next round."""
    out, at = [], 0
    for start, end, new in sorted(edits, key=lambda edit: edit[:2]):
        if start >= at:
            out += [text[at:start], new]
            at = end
    return "".join(out) + text[at:]


def _replaced(piece: Piece, new: str) -> list[Edit]:
    return [] if new == piece.token.content else [(piece.start, piece.end, new)]


def _as_text(tag: str) -> str:
    """Raw HTML written so that it shows as text."""
    return ESCAPED["<"] + tag[1:]


def _definition(block: Lines, source: Source) -> list[Edit]:
    """A link reference definition shown as text: its `[` escaped."""
    at = source.line(block.first).find("[")
    start = source.start(block.first) + at
    return [(start, start, "\\")] if at >= 0 else []


def _row(block: Lines, source: Source) -> list[Edit]:
    """A table row's cells past its table's columns, which GitHub drops, joined to its last."""
    line = source.line(block.first)
    body = len(container_prefix(line))
    pipes = [found.start() for found in re.finditer(r"(?<!\\)\|", line) if found.start() >= body]
    if pipes and not line[body : pipes[0]].strip():
        pipes.pop(0)  # a leading `|`
    if pipes and not line[pipes[-1] + 1 :].strip():
        pipes.pop()  # a trailing one
    start = source.start(block.first)
    return [(start + at, start + at, "\\") for at in pipes[block.columns - 1 :]]


def _fence(block: Lines, source: Source) -> list[Edit]:
    """A fence closed if it was left open; its info string past a language shown as text."""
    token, line = block.token, source.line(block.first)
    at = line.find(token.markup)
    # the fence's containers on a later line: list markers as spaces, a quote's `>` with
    # a space after it (one it lacked would take a space of the indent as its own)
    quoted = re.sub(r">(?![ \t])", "> ", line[:at])
    indent = _LIST_MARKER.sub(lambda marker: " " * len(marker[0]), quoted)
    edits: list[Edit] = []
    info = line[at + len(token.markup) :].strip()
    if not _INFO.fullmatch(info):
        language = info.split()[0] if _INFO.fullmatch(info.split()[0]) else ""
        note = f"(code block info: {info})\n{indent}{token.markup}{language}"
        edits.append((source.start(block.first) + at, source.end(block.first), note))
    if block.last == block.first or not _closes(token.markup, source.line(block.last)):
        end = source.end(block.last)
        edits.append((end, end, f"\n{indent}{token.markup}"))
    return edits


def _closes(fence: str, line: str) -> bool:
    return re.fullmatch(rf"[ \t>]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*", line) is not None
