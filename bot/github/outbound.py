"""Agent text made safe to post on GitHub: what a model wrote reaches people as plain words.

An agent may follow any instruction hidden in an issue, so everything it wrote (the pull
request's title and body, the tracking comment's plan, result and errors, gate questions and
options) passes `Outbound.block` or `Outbound.inline` before the App posts it:

- `sanitize`, as for incoming text: hidden HTML comments, invisible and bidi characters go;
- a closing keyword (`close`, `Fixes`, `resolved:` ...) before `#N`, `GH-N`, `owner/repo#N`
  or an issue URL acts only on the job's own issue: before any other it reads
  `Fixes (reference only) #999`, which GitHub does not act on;
- an image is kept only when it loads from GitHub (github.com, *.githubusercontent.com, the
  GITHUB_SERVER_URL host, or a relative URL); any other becomes a plain link, so nothing
  loads from an address an agent chose (a tracking pixel);
- an @-mention (`@login`, `@org/team`) is put in backticks, so it pings nobody; the App's own
  mentions (the decider in a gate) are composed outside the agent's text.

Where Markdown is ambiguous the rules err towards rewriting: keywords and images are
rewritten in code too, and a mention is left alone only inside code that certainly renders
as code (a closed fence, a one-line code span) or inside a URL. Pure, no I/O.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

from bot.github.sanitizer import sanitize

NEUTRAL = " (reference only)"  # between a keyword and a reference it may not close
GITHUB_IMAGE_HOSTS = ("github.com", "githubusercontent.com")  # and their subdomains

_KEYWORD = r"(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)"
_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"
_REF = (
    rf"(?:(?:(?P<owner>{_NAME})/(?P<repo>{_NAME}))?#(?P<num>\d+)|GH-(?P<gh>\d+)"
    rf"|(?P<url>https?://[^\s/<>()]+/{_NAME}/{_NAME}/(?:issues|pull)/\d+))"
)
_ANY_REF = re.sub(r"\?P<\w+>", "", _REF)  # the same, unnamed, to repeat in a list
_CLOSING = re.compile(
    rf"(?<![\w-])(?P<keyword>[*_~]*{_KEYWORD}[*_~]*)(?P<sep>[ \t]*:?[ \t]*)"
    rf"(?P<refs>{_REF}(?:[ \t]*(?:,|\band\b|&)[ \t]*{_ANY_REF})*)(?!\w)",
    re.IGNORECASE,
)
_ONE_REF = re.compile(_REF, re.IGNORECASE)
_MEDIA_TAG = r"<(?:img|image|source|video|audio|input|embed|object|iframe)\b"
_MEDIA_OPEN = re.compile(_MEDIA_TAG, re.IGNORECASE)
# a whole tag, quotes balanced and no `<` or `>` inside a value; anything else is escaped
_MEDIA = re.compile(_MEDIA_TAG + r"""(?:[^<>"']|"[^"<>]*"|'[^'<>]*'){0,1000}>""", re.IGNORECASE)
_URL_ATTRIBUTE = re.compile(
    r"""\b(?:src|srcset|poster|data|href)\s*=\s*("[^"]*"|'[^']*'|[^\s>]+)""", re.IGNORECASE
)
_MARKDOWN_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_URL_NOISE = re.compile(r"[\x00-\x20]")  # browsers drop tabs and newlines inside a URL
_MENTION = re.compile(r"(?<![\w`])@[A-Za-z0-9][A-Za-z0-9-]*(?:/[A-Za-z0-9][\w.-]*)?(?![\w@])")
_LINKISH = re.compile(  # a link destination, an autolink, a bare URL: no mentions there
    r"\]\([^)\s]*|<[A-Za-z][A-Za-z0-9+.-]{1,31}:[^\s<>]*>|\b(?:https?://|www\.)[^\s<]*",
    re.IGNORECASE,
)
# An image GitHub shows as one: plain alt text (no brackets, code, HTML or escapes, which
# change how Markdown pairs them), a URL and an optional title, closed. Any other `![` loses
# its `!`: at worst a GitHub image becomes a link.
_BREAK = r"[ \t]*\n?[ \t]*"
_PLAIN_IMAGE = re.compile(
    rf"\[[^\[\]`<>\\\n]{{0,500}}\]\({_BREAK}(<[^<>\n]*>|[^\s()<>]+)"
    rf"""(?:{_BREAK}(?:"[^"\n]*"|'[^'\n]*'|\([^()\n]*\)))?{_BREAK}\)"""
)
_FENCE = re.compile(r"( {0,3})(`{3,}|~{3,})(.*)")
_HTML_START = re.compile(r" {0,3}<[A-Za-z/!?]")


@dataclass(frozen=True)
class Outbound:
    """Agent text bound for one job's issue, the one issue its closing keywords may close."""

    owner: str
    repo: str
    number: int
    server_url: str = "https://github.com"

    def block(self, text: str) -> str:
        """Agent text (Markdown, any length) made safe to post."""
        text = _CLOSING.sub(self._closing, sanitize(text))
        text = re.sub(r"!(?=\[)", lambda m: self._bang(text, m.end()), text)
        text = self._media(text)
        return _outside_fences(text, _defuse_mentions)

    def inline(self, text: str, *, limit: int | None = None) -> str:
        """Agent text for one line (a title, a list item): `block`, its lines joined.

        With `limit`, the text is shortened before it is made safe until the result fits, so
        no cut falls inside what the rules wrote (a backticked mention, say).
        """
        line = " ".join(self.block(text).split("\n")).strip()
        while limit is not None and len(line) > limit:
            text = text[: min(limit, len(text) * 3 // 4)]
            line = " ".join(self.block(text).split("\n")).strip()
        return line

    def _bang(self, text: str, at: int) -> str:
        """Keep the `!` of `![alt](url)` only when `url` is GitHub's: else it is a link."""
        image = _PLAIN_IMAGE.match(text, at)
        return "!" if image is not None and self.github_url(image[1]) else ""

    def _media(self, text: str) -> str:
        """HTML that loads something: kept if from GitHub, else a link (or, unparsed, text)."""
        out, at = [], 0
        while opened := _MEDIA_OPEN.search(text, at):
            tag = _MEDIA.match(text, opened.start())
            out.append(text[at : opened.start()])
            if tag is None:
                out.append("&lt;")
                at = opened.start() + 1
            else:
                out.append(self._media_tag(tag))
                at = tag.end()
        return "".join(out) + text[at:]

    def _media_tag(self, match: re.Match[str]) -> str:
        urls = [
            candidate.split()[0]
            for value in _URL_ATTRIBUTE.findall(match[0])
            for candidate in html.unescape(value.strip("\"'")).split(",")
            if candidate.strip()
        ]
        foreign = [url for url in urls if not self.github_url(url)]
        if not foreign:
            return match[0]
        href = html.escape(foreign[0])
        return f'<a href="{href}">{href}</a>'

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

    def _closing(self, match: re.Match[str]) -> str:
        if all(self._own(ref) for ref in _ONE_REF.finditer(match["refs"])):
            return match[0]
        return f"{match['keyword']}{NEUTRAL}{match['sep'] or ' '}{match['refs']}"

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


def _defuse_mentions(text: str) -> str:
    """Mentions in backticks, except inside one-line code spans and URLs."""
    out, at = [], 0
    for start, end in _no_mentions(text):
        if start >= at:
            out += [_MENTION.sub(r"`\g<0>`", text[at:start]), text[start:end]]
            at = end
    out.append(_MENTION.sub(r"`\g<0>`", text[at:]))
    return "".join(out)


def _no_mentions(text: str) -> list[tuple[int, int]]:
    """Where mentions do not ping: code spans (one line, in linear time) and URLs."""
    found = [(m.start(), m.end()) for m in _LINKISH.finditer(text)]
    offset = 0
    for line in text.split("\n"):
        runs = [(m.start(), m.end()) for m in re.finditer(r"`+", line)]
        by_length: dict[int, list[int]] = {}
        for n, (start, end) in enumerate(runs):
            by_length.setdefault(end - start, []).append(n)
        n = 0
        while n < len(runs):
            same = by_length[runs[n][1] - runs[n][0]]
            later = bisect.bisect_right(same, n)
            if later == len(same):
                n += 1
                continue
            found.append((offset + runs[n][0], offset + runs[same[later]][1]))
            n = same[later] + 1
        offset += len(line) + 1
    return sorted(found)


def _outside_fences(text: str, prose: Callable[[str], str]) -> str:
    """Apply `prose` to all but the fenced code blocks that certainly render as code."""
    lines = text.split("\n")
    chunks: list[str] = []
    start = i = 0
    in_html = False  # inside an HTML block a ``` line is not a fence
    while i < len(lines):
        end = None if in_html else _fence_end(lines, i)
        if end is None:
            in_html = bool(lines[i].strip()) and (in_html or bool(_HTML_START.match(lines[i])))
            i += 1
            continue
        if start < i:
            chunks.append(prose("\n".join(lines[start:i])))
        chunks.append("\n".join(lines[i : end + 1]))
        start = i = end + 1
    if start < len(lines):
        chunks.append(prose("\n".join(lines[start:])))
    return "\n".join(chunks)


def _fence_end(lines: list[str], start: int) -> int | None:
    """The closing line of a fenced block opened at `start`: None if unsure it is one."""
    opened = _FENCE.fullmatch(lines[start])
    if opened is None or (opened[2][0] == "`" and "`" in opened[3]):
        return None
    indent, fence = len(opened[1]), opened[2]
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if line.strip() and len(line) - len(line.lstrip(" ")) < indent:
            return None  # less indented than the fence: its list item may have ended
        closing = line.strip(" ")
        if (
            len(line) - len(line.lstrip(" ")) <= 3 + indent
            and closing.rstrip(" \t")
            and (
                set(closing.rstrip(" \t")) == {fence[0]}
                and len(closing.rstrip(" \t")) >= len(fence)
            )
        ):
            return i
    return None  # never closed: treated as prose
