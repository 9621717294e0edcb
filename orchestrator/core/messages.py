"""The engine's value types: messages, tool calls, assistant turns, usage, inbox items, ids."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cached_property
from typing import Any, Literal

Role = Literal["user", "assistant", "tool"]
JSONObject = Mapping[str, Any]


class ConversationKind(StrEnum):
    """Conversation kinds; the value is the stable id prefix."""

    OFFICE_MANAGER = "om"
    JOB = "job"
    DISPATCH = "agent"
    PROXY = "proxy"
    TASK = "task"


class InboxKind(StrEnum):
    """What an inbox item is: a request or reply of Send, a human answer, or a teammate message."""

    REQUEST = "request"
    REPLY = "reply"
    HUMAN = "human"
    MESSAGE = "message"
    BROADCAST = "broadcast"
    SHUTDOWN_REQUEST = "shutdown_request"
    SHUTDOWN_RESPONSE = "shutdown_response"
    PLAN_APPROVAL_RESPONSE = "plan_approval_response"


TEAMMATE_KINDS = frozenset(
    {
        InboxKind.MESSAGE,
        InboxKind.BROADCAST,
        InboxKind.SHUTDOWN_REQUEST,
        InboxKind.SHUTDOWN_RESPONSE,
        InboxKind.PLAN_APPROVAL_RESPONSE,
    }
)


def dispatch_id(initiator: str, recipient: str) -> str:
    """A fresh dispatch conversation id: parallel Sends to one role never share a context."""
    return f"{ConversationKind.DISPATCH}:{initiator}:{recipient}:{uuid.uuid4()}"


def task_conversation_id(job_id: int, number: int) -> str:
    """A fresh id for one mini-team run of a task (a task may be dispatched again)."""
    return f"{ConversationKind.TASK}:{job_id}:{number}:{uuid.uuid4()}"


def job_conversation_id(job_id: int) -> str:
    """The root conversation of a job."""
    return f"{ConversationKind.JOB}:{job_id}"


@dataclass(frozen=True)
class Usage:
    """Tokens one model call used."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def total(self) -> int:
        """Every token billed: input, output, and the cache's reads and writes."""
        return (
            self.input_tokens
            + self.output_tokens
            + self.cache_read_tokens
            + self.cache_write_tokens
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class ToolCall:
    """One tool use the model asked for."""

    call_id: str
    name: str
    args: JSONObject = field(default_factory=dict)


@dataclass(frozen=True)
class AssistantTurn:
    """What a model returns for one call."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    usage: Usage = Usage()


@dataclass(frozen=True)
class ToolResult:
    """The outcome of one tool call, as the model will read it."""

    call_id: str
    output: str
    is_error: bool = False
    stop: str | None = None  # a limit the call ran into ends the agent's turn: which, and why


@dataclass(frozen=True)
class Message:
    """One persisted transcript entry of a conversation."""

    conversation_id: str
    seq: int
    sender: str
    role: Role
    content: JSONObject
    usage: Usage | None = None

    @cached_property
    def size(self) -> int:
        """Characters of the stored content; computed once (compaction sums it per call)."""
        return len(json.dumps(self.content, ensure_ascii=False))

    @property
    def text(self) -> str:
        """The message's text, if it has any."""
        return str(self.content.get("text", ""))

    @property
    def whole_text(self) -> str:
        """Its text as the model reads it: after what a mini-team's members are all sent
        first (`shared`, the task), where the message has that."""
        shared = str(self.content.get("shared") or "")
        return f"{shared}\n\n{self.text}" if shared else self.text

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """Tool calls of an assistant message."""
        return tuple(
            ToolCall(c["id"], c["name"], c.get("args", {}))
            for c in self.content.get("tool_calls", ())
        )

    @property
    def call_id(self) -> str | None:
        """The call a tool message answers."""
        value = self.content.get("call_id")
        return None if value is None else str(value)


@dataclass(frozen=True)
class InboxItem:
    """Something delivered to a conversation and not yet taken into its transcript."""

    item_id: int
    conversation_id: str
    kind: InboxKind
    sender: str
    content: JSONObject
    call_id: str | None = None
    source_conversation: str | None = None


def assistant_content(turn: AssistantTurn) -> dict[str, Any]:
    """The stored JSON form of an assistant turn."""
    content: dict[str, Any] = {"text": turn.text}
    if turn.tool_calls:
        content["tool_calls"] = [
            {"id": c.call_id, "name": c.name, "args": dict(c.args)} for c in turn.tool_calls
        ]
    return content


def tool_content(result: ToolResult) -> dict[str, Any]:
    """The stored JSON form of a tool result."""
    content: dict[str, Any] = {
        "call_id": result.call_id,
        "text": result.output,
        "is_error": result.is_error,
    }
    if result.stop is not None:
        content["stop"] = result.stop
    return content


def dumps(value: JSONObject) -> str:
    """Compact, stable JSON for the store."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
