"""What a comment on an issue says to the App: whole-line commands, quoted gates, its words.

A command is a whole line that starts with `/` and a known name (`/approve`, `/approve
a1b2c3d`, `/reject <why>`, ...), as Prow reads `/lgtm`: a `/approve` inside a sentence, a
quote or a fenced code block is not one. A quoted line (`> `, as GitHub's "Quote reply"
makes) names the gate it quotes by its number (`Question 3`) or its hash (`plan a1b2c3d`).
Everything else is the reply's own text, a plain answer to a question gate. Pure: no I/O.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from orchestrator.api import GATE_KINDS

GATE_COMMANDS = ("approve", "reject", "revise", "override", "decider")
JOB_COMMANDS = (
    "status",
    "pause",
    "resume",
    "hold",
    "unhold",
    "steer",
    "withdraw",
    "budget",
    "remember",
    "reopen",
    "forget",
)
ALIASES = {"hold": "pause", "unhold": "resume"}
KNOWN = GATE_COMMANDS + JOB_COMMANDS
_COMMAND = re.compile(r"/([A-Za-z][A-Za-z-]*)(?:\s+(.*))?")
_QUESTION = re.compile(r"\bquestion (\d+)\b", re.IGNORECASE)
_HEX = re.compile(r"[0-9a-f]{7,40}")
_DOLLARS = re.compile(r"\$?(\d{1,6}(?:\.\d{1,2})?)\s*(?:USD)?", re.IGNORECASE)
_LOGIN = re.compile(r"@?([A-Za-z0-9](?:[A-Za-z0-9-]{0,38}))")


@dataclass(frozen=True)
class Command:
    """One whole-line command: its name (lower case) and the rest of its line."""

    name: str
    arg: str = ""

    @property
    def hash(self) -> str | None:
        """The content hash an `/approve <hash>` names, if it names one."""
        word = self.arg.split(maxsplit=1)[0].lower() if self.arg else ""
        return word if self.name == "approve" and _HEX.fullmatch(word) else None

    @property
    def dollars(self) -> float | None:
        """The amount a `/budget <amount>` names (`25`, `$25`, `12.50`), if it names one."""
        found = _DOLLARS.fullmatch(self.arg.strip()) if self.name == "budget" else None
        return float(found.group(1)) if found else None

    @property
    def login(self) -> str | None:
        """The login a `/decider @login` names, if it names one."""
        match = _LOGIN.fullmatch(self.arg.strip()) if self.name == "decider" else None
        return match.group(1) if match else None


@dataclass(frozen=True)
class Reply:
    """A comment, read: its commands, what it quotes, and its own words."""

    commands: tuple[Command, ...] = ()
    unknown: tuple[str, ...] = ()  # `/word` lines that are no command of ours
    quoted_gates: frozenset[int] = frozenset()  # gate numbers in quoted lines
    quoted_hashes: frozenset[str] = frozenset()  # gate hashes in quoted lines
    text: str = ""  # the lines that are neither commands nor quotes

    @property
    def gate_commands(self) -> tuple[Command, ...]:
        """The commands that move a gate."""
        return tuple(c for c in self.commands if c.name in GATE_COMMANDS)

    @property
    def job_commands(self) -> tuple[Command, ...]:
        """The commands that act on the job itself (`/pause`, `/steer`, ...)."""
        return tuple(c for c in self.commands if c.name in JOB_COMMANDS)


@functools.cache
def _hash_quote(kinds: tuple[str, ...]) -> re.Pattern[str]:
    """A quoted gate hash as questions show it: a kind, then its hash (`plan a1b2c3d`)."""
    return re.compile(rf"\b(?:{'|'.join(map(re.escape, kinds))})\s+`?([0-9a-f]{{7,40}})\b")


def parse_reply(body: str, *, kinds: Iterable[str] = GATE_KINDS.names) -> Reply:
    """Read a comment's body (already sanitized); `kinds` are the gate kinds a quote may name
    with a hash (the running engine's)."""
    quoted = _hash_quote(tuple(kinds))
    commands: list[Command] = []
    unknown: list[str] = []
    gates: set[int] = set()
    hashes: set[str] = set()
    own: list[str] = []
    fenced = False
    for line in body.splitlines():
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            fenced = not fenced
            own.append(line)
            continue
        if fenced:
            own.append(line)
        elif stripped.startswith(">"):
            gates.update(int(n) for n in _QUESTION.findall(stripped))
            hashes.update(quoted.findall(stripped))
        elif match := _COMMAND.fullmatch(stripped):
            name, arg = match.group(1).lower(), (match.group(2) or "").strip()
            if name in KNOWN:
                commands.append(Command(ALIASES.get(name, name), arg))
            else:
                unknown.append(f"/{name}")
        else:
            own.append(line)
    return Reply(
        tuple(commands),
        tuple(unknown),
        frozenset(gates),
        frozenset(hashes),
        "\n".join(own).strip(),
    )
