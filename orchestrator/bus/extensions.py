"""The bus's extension points: where features act inside its transactions.

The bus itself knows conversations, Sends, teammate messages and an agent's questions to a
person. Everything else a step may mean is a feature's, registered here by the composition
root (the one place that knows every feature) before the bus runs:

- a **gate kind** (core/gate_kinds.py) and how an answer to a gate of that kind, asked by
  the engine, is carried out (`settle`);
- a **turn tool**: a tool whose call the bus carries out in the turn's own transaction
  (a lead's `dispatch`, say), opening a conversation whose reply is the call's result;
- a **hold** on a tool's calls: a feature may hold all of one turn's calls of a tool at a
  gate (the office manager's first sends, a lead's first dispatches), carried out or
  refused once the gate is answered;
- a **held reply**: a conversation's reply to its parent may be held at a gate (a
  mini-team ending in a merge conflict);
- a conversation's **end**, by its kind (a mini-team's members exit with it);
- **admission**: whether a conversation may take its first step now (a job's bound on
  mini-teams at once);
- a job's **content** that every gate of it pins (its issue's latest text, the commit it
  started from): the bus alone knows only its title and first message.

Every hook runs inside the step's transaction: its writes commit, or vanish, with the step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bus import gates
from orchestrator.bus.gates import QUESTION, Gate, JobContent
from orchestrator.bus.transactions import ConversationRow, Outcome
from orchestrator.core.gate_kinds import GateKind, GateKinds
from orchestrator.core.messages import ConversationKind, ToolCall, ToolResult
from orchestrator.core.tools import ToolSpec
from orchestrator.store.sqlite import Tx

Settle = Callable[[Tx, Gate], Iterable[str]]
"""Carry out an answered engine gate; the conversations that now have work."""
Hold = Callable[[Tx, ConversationRow, Sequence[Any]], int | None]
"""Hold a turn's calls of one tool at a gate: the gate's id, or None to let them go now."""
HoldReply = Callable[[Tx, ConversationRow], int | None]
"""Hold a conversation's reply to its parent at a gate: the gate's id, or None."""
OnEnd = Callable[[Tx, ConversationRow, Outcome], None]
"""What a conversation's end brings about, beyond its reply."""
Admit = Callable[[Tx, ConversationRow], bool]
"""Whether a conversation may take its first step now."""


@dataclass(frozen=True)
class TurnTool:
    """A tool the bus carries out in the turn's transaction: its spec as the model sees it,
    `resolve` (a call into what it intends; ToolError: the model reads why not) and
    `carry_out` (the intent done: the call's result now, or None when it opened a
    conversation whose reply is the result, which the caller waits for, as for a Send)."""

    spec: ToolSpec
    resolve: Callable[[ToolCall], Any]
    carry_out: Callable[[Tx, ConversationRow, Any, Outcome], ToolResult | None]


@dataclass
class Extensions:
    """What features add to the bus; filled by the composition root before the bus runs."""

    kinds: GateKinds = field(default_factory=lambda: GateKinds([QUESTION]))
    settlers: dict[str, Settle] = field(default_factory=dict)
    tools: dict[str, TurnTool] = field(default_factory=dict)
    holds: dict[str, list[Hold]] = field(default_factory=dict)
    reply_holds: list[HoldReply] = field(default_factory=list)
    ends: dict[str, list[OnEnd]] = field(default_factory=dict)
    admissions: list[Admit] = field(default_factory=list)
    content: JobContent = gates.job_content

    def gate_kind(self, kind: GateKind, *, settle: Settle | None = None) -> GateKind:
        """Know a gate kind, and how an answer to an engine gate of it is carried out."""
        self.kinds.add(kind)
        if settle is not None:
            self.settlers[kind.name] = settle
        return kind

    def tool(self, tool: TurnTool) -> None:
        """Carry out `tool`'s calls in the turn's transaction."""
        if tool.spec.name in self.tools:
            raise ValueError(f"two turn tools are named {tool.spec.name!r}")
        self.tools[tool.spec.name] = tool

    def hold(self, tool: str, hold: Hold) -> None:
        """Let `hold` keep a turn's calls of `tool` back at a gate."""
        self.holds.setdefault(tool, []).append(hold)

    def hold_reply(self, hold: HoldReply) -> None:
        """Let `hold` keep a conversation's reply back at a gate."""
        self.reply_holds.append(hold)

    def on_end(self, kind: ConversationKind, hook: OnEnd) -> None:
        """Run `hook` when a conversation of `kind` ends."""
        self.ends.setdefault(kind.value, []).append(hook)

    def admit(self, hook: Admit) -> None:
        """Let `hook` keep a conversation from taking its first step yet."""
        self.admissions.append(hook)

    def pin_content(self, content: JobContent) -> None:
        """Let `content` say what each gate of a job pins of it."""
        self.content = content

    @property
    def specs(self) -> Mapping[str, ToolSpec]:
        """The turn tools' specs, by name."""
        return {name: tool.spec for name, tool in self.tools.items()}

    def held(self, tx: Tx, row: ConversationRow, tool: str, calls: Sequence[Any]) -> int | None:
        """The gate the first hold on `tool` opened for `calls`, if one did."""
        for hold in self.holds.get(tool, ()) if calls else ():
            if (gate_id := hold(tx, row, calls)) is not None:
                return gate_id
        return None

    def held_reply(self, tx: Tx, row: ConversationRow) -> int | None:
        """The gate the first reply hold opened for `row`'s reply, if one did."""
        for hold in self.reply_holds:
            if (gate_id := hold(tx, row)) is not None:
                return gate_id
        return None

    def admits(self, tx: Tx, row: ConversationRow) -> bool:
        """Whether every admission hook lets `row` take its first step now."""
        return all(admit(tx, row) for admit in self.admissions)

    def ended(self, tx: Tx, row: ConversationRow, outcome: Outcome) -> None:
        """Run what `row`'s kind of conversation brings about when it ends."""
        for hook in self.ends.get(row.kind, ()):
            hook(tx, row, outcome)

    def settle(self, tx: Tx, gate: Gate) -> tuple[str, ...]:
        """Carry out an answered engine gate by its kind (nothing for a kind with no
        settler); the conversations that now have work."""
        settle = self.settlers.get(gate.kind)
        return () if settle is None else tuple(settle(tx, gate))
