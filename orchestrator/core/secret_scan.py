"""Secrets in what a diff adds: the exact values the engine holds, and credential patterns.

`scan` reads a unified diff (git's, `--unified=0 --text`) and looks at each added line, and
at the name of each file added or renamed, for

- an exact **value** the engine holds (core/secrecy.py `SecretValues`: the model's key, the
  App's key line by line, the webhook secret, tokens, the operator's setup secrets), found
  as a substring of one line; and
- a well-known **pattern**: AWS access key ids, GitHub tokens, Slack tokens, PEM private
  keys, Anthropic and Google API keys, Stripe live keys (`PATTERNS`).

What is not found: a value split over lines, encoded (base64, hex, URL-escaped), inside a
compressed file, or shorter than `MIN_SECRET_CHARS`; a credential no pattern describes. The
scan is bounded: past `SCAN_MAX_BYTES` of added text it stops and says so (`unscanned`), so
a huge diff is never passed as clean. Findings carry the file and line and show the secret
masked: a value by its name only, a pattern's match by its first characters and length.
Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from orchestrator.core.secrecy import mask

SCAN_MAX_BYTES = 32 * 1024 * 1024  # of added lines; the rest is reported unscanned
FINDINGS_KEPT = 200  # a diff full of them is stopped just the same
PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}")),
    ("GitHub fine-grained token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}")),
    ("Slack token", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("private key", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----")),
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("Google API key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("Stripe live key", re.compile(r"\b[rs]k_live_[0-9A-Za-z]{16,}")),
)
_HUNK = re.compile(rb"^@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@")
_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}


@dataclass(frozen=True)
class Finding:
    """One secret found: where (the file, its line; None: the file's name), what it is
    (a pattern's kind, or the name of the value the engine holds), shown masked."""

    path: str
    line: int | None
    what: str
    shown: str
    value: bool  # an exact value the engine holds, not a pattern

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else f"{self.path} (its name)"
        kind = "the value of" if self.value else "a"
        return f"{where}: {kind} {self.what} {self.shown}"


@dataclass(frozen=True)
class Scan:
    """What a scan found, and what it did not look at (None: the whole diff)."""

    findings: tuple[Finding, ...] = ()
    unscanned: str | None = None
    more: int = 0  # findings past FINDINGS_KEPT, counted only

    @property
    def values(self) -> tuple[Finding, ...]:
        """The findings of exact values the engine holds: never pushed."""
        return tuple(f for f in self.findings if f.value)

    @property
    def clean(self) -> bool:
        """Nothing found and nothing left unscanned."""
        return not self.findings and self.unscanned is None


class Scanner:
    """The values and patterns to look for, compiled once."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.names = dict(values)
        ordered = sorted(self.names, key=len, reverse=True)  # the longest of overlapping ones
        self.values = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def line(self, text: str, *, path: str, number: int | None) -> list[Finding]:
        """The secrets in one line of text (a value's span hides a pattern's inside it)."""
        found: list[Finding] = []
        spans: list[tuple[int, int]] = []
        for match in self.values.finditer(text) if self.values else ():
            name = self.names[match.group()]
            found.append(Finding(path, number, name, mask(match.group(), prefix=False), True))
            spans.append(match.span())
        for kind, pattern in PATTERNS:
            for match in pattern.finditer(text):
                start, end = match.span()
                if not any(start < e and s < end for s, e in spans):
                    found.append(Finding(path, number, kind, mask(match.group()), False))
        return found

    def redact(self, text: str) -> str:
        """`text` (a file's name) with every value and pattern in it masked."""
        if self.values:
            text = self.values.sub(lambda m: f"[{self.names[m.group()]}]", text)
        for _, pattern in PATTERNS:
            text = pattern.sub(lambda m: mask(m.group()), text)
        return text


def scan(
    diff: bytes,
    values: Mapping[str, str],
    *,
    names: Iterable[str] = (),
    limit: int = SCAN_MAX_BYTES,
) -> Scan:
    """The secrets `diff` adds (values: each secret value and its name), up to `limit`
    bytes of added lines, and those in `names` (the names of the files it adds or renames:
    a pure rename or an empty file has no line that says its name)."""
    scanner = Scanner(values)
    found: list[Finding] = []
    for name in names:
        found += scanner.line(name, path=scanner.redact(name), number=None)
    seen = 0
    for path, number, content in _added(diff, scanner):
        seen += len(content)
        if seen > limit:
            return _kept(found, f"the diff past {limit:,} bytes of added lines")
        found += scanner.line(content.decode(errors="replace"), path=path, number=number)
    return _kept(found, None)


def _kept(found: list[Finding], unscanned: str | None) -> Scan:
    return Scan(tuple(found[:FINDINGS_KEPT]), unscanned, max(0, len(found) - FINDINGS_KEPT))


def _added(diff: bytes, scanner: Scanner) -> Iterator[tuple[str, int, bytes]]:
    """Each added line: its file's name (redacted), its line number, its bytes."""
    path: str | None = None
    header = True  # between `diff --git` and the file's first hunk
    number = 0
    for raw in diff.split(b"\n"):
        if raw.startswith(b"diff --git "):
            path, header = None, True
        elif header and raw.startswith(b"+++ "):
            name = _path(raw[4:])
            path = None if name is None else scanner.redact(name)
        elif raw.startswith(b"@@"):  # no line of a hunk starts so: each has its prefix
            header = False
            hunk = _HUNK.match(raw)
            number = int(hunk.group(1)) if hunk else 0
        elif not header and path is not None and raw.startswith((b"+", b" ")):
            if raw.startswith(b"+"):
                yield path, number, raw[1:]
            number += 1


def _path(raw: bytes) -> str | None:
    """A `+++` line's file name (None: /dev/null), unquoted as git quotes it, without its
    `b/` prefix and the tab git adds after a name with a space."""
    raw = raw.removesuffix(b"\t")
    if raw == b"/dev/null":
        return None
    if raw.startswith(b'"') and raw.endswith(b'"') and len(raw) >= 2:
        raw = _unquote(raw[1:-1])
    return raw.removeprefix(b"b/").decode(errors="backslashreplace")


def _unquote(quoted: bytes) -> bytes:
    """Git's C-style quoting undone: `\\t`, `\\"`, `\\\\`, `\\ooo` octal bytes."""
    out = bytearray()
    index = 0
    while index < len(quoted):
        byte = quoted[index]
        if byte == 92 and index + 1 < len(quoted):  # a backslash
            nxt = chr(quoted[index + 1])
            if nxt in "01234567" and index + 4 <= len(quoted):
                out.append(int(quoted[index + 1 : index + 4], 8) & 0xFF)
                index += 4
                continue
            out.append(_ESCAPES.get(nxt, ord(nxt)))
            index += 2
            continue
        out.append(byte)
        index += 1
    return bytes(out)
