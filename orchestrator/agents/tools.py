"""Tool declarations the model sees, and the bus tools the engine carries out itself.

`send` and `message` are not run like file tools: they become rows in the same
transaction as the assistant turn that called them (dispatch.record_turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from orchestrator.bus.dispatch import MessageIntent
from orchestrator.bus.gates import AskIntent
from orchestrator.bus.routing import Router
from orchestrator.bus.sends import SendIntent
from orchestrator.core.errors import RoutingError, ToolError
from orchestrator.core.messages import InboxKind, ToolCall, ToolResult
from orchestrator.core.tools import ToolSpec, object_spec
from orchestrator.teams.transactions import DispatchIntent

SEND = "send"
MESSAGE = "message"
ASK_HUMAN = "ask_human"
DISPATCH = "dispatch"
BUS_TOOLS = frozenset({SEND, MESSAGE, ASK_HUMAN, DISPATCH})
# Calls whose result arrives later through the inbox, not from running the tool.
ANSWERED_LATER = frozenset({SEND, ASK_HUMAN, DISPATCH})


SEND_SPEC = ToolSpec(
    SEND,
    "Send a self-contained brief to a member of your team and wait for their reply. The "
    "recipient sees only your brief, never your conversation. Several sends in one turn run "
    "in parallel; you resume once every reply is in. To follow up in an earlier conversation, "
    "pass its context_id (from that send's result).",
    {
        "type": "object",
        "properties": {
            "member": {"type": "string", "description": "the roster name to send to"},
            "message": {"type": "string", "description": "the whole brief"},
            "context_id": {"type": "string", "description": "continue this conversation"},
        },
        "required": ["member", "message"],
        "additionalProperties": False,
    },
)

MESSAGE_SPEC = ToolSpec(
    MESSAGE,
    "Post a message to a teammate's inbox without waiting for an answer; to='*' broadcasts "
    "to the whole team. Leads may send shutdown_request (the teammate wraps up and its final "
    "output comes back as shutdown_response) or plan_approval_response.",
    {
        "type": "object",
        "properties": {
            "to": {"type": "string"},
            "content": {"type": "string"},
            "type": {
                "type": "string",
                "enum": ["message", "shutdown_request", "plan_approval_response"],
            },
            "approve": {"type": "boolean"},
        },
        "required": ["to", "content"],
        "additionalProperties": False,
    },
)

ASK_HUMAN_SPEC = ToolSpec(
    ASK_HUMAN,
    "Ask the person who decides for this work a question and wait for the answer. Use it "
    "for decisions that are theirs (scope, trade-offs, anything irreversible), not for what "
    "you can find out yourself. Offer options when the choice is between a few.",
    {
        "type": "object",
        "properties": {
            "question": {"type": "string"},
            "options": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["question"],
        "additionalProperties": False,
    },
)

DISPATCH_SPEC = object_spec(
    DISPATCH,
    "Start a fresh mini-team on a task of the board: a worker in the task's own git worktree "
    "and the reviewers its review level asks for. The task must be pending (or blocked, to try "
    "again) with every task it waits for done. The engine gives the worker the task's spec; "
    "your brief adds what the spec does not say: relevant files, facts found, guidance after "
    "an escalation. You get one reply when the task ends: merged (with its result), blocked, "
    "escalated after its review rounds, or a merge conflict with the files and hunks. "
    "Dispatch independent tasks in the same turn so they run at once.",
    ["task", "brief"],
    task={"type": "integer", "description": "the task's number on the board"},
    brief={"type": "string", "description": "operational context for the mini-team"},
    allowance_usd={
        "type": "number",
        "description": "dollars the mini-team may spend (default: an even share of what is "
        "left of the job's budget among its unfinished tasks); past it, it stops and you "
        "decide",
    },
)

BUS_SPECS: Mapping[str, ToolSpec] = {
    SEND: SEND_SPEC,
    MESSAGE: MESSAGE_SPEC,
    ASK_HUMAN: ASK_HUMAN_SPEC,
    DISPATCH: DISPATCH_SPEC,
}


@dataclass
class BusCalls:
    """The bus tool calls of one assistant turn, resolved into intents or refusals."""

    sends: list[SendIntent] = field(default_factory=list)
    messages: list[MessageIntent] = field(default_factory=list)
    asks: list[AskIntent] = field(default_factory=list)
    refusals: list[ToolResult] = field(default_factory=list)
    dispatches: list[DispatchIntent] = field(default_factory=list)


def resolve_bus_calls(calls: Sequence[ToolCall], *, sender: str, router: Router) -> BusCalls:
    """Route every send and check every message of a turn; refusals go back to the model."""
    resolved = BusCalls()
    for call in calls:
        try:
            if call.name == SEND:
                resolved.sends.append(_send_intent(call, sender=sender, router=router))
            elif call.name == MESSAGE:
                resolved.messages.append(_message_intent(call))
            elif call.name == ASK_HUMAN:
                resolved.asks.append(_ask_intent(call))
            elif call.name == DISPATCH:
                resolved.dispatches.append(_dispatch_intent(call))
        except ToolError as exc:
            resolved.refusals.append(ToolResult(call.call_id, str(exc), is_error=True))
    _refuse_double_sends(resolved)
    return resolved


def _send_intent(call: ToolCall, *, sender: str, router: Router) -> SendIntent:
    member = _string(call, "member")
    brief = _string(call, "message")
    context_id = call.args.get("context_id")
    if context_id is not None and not isinstance(context_id, str):
        raise ToolError("send: context_id must be a string")
    try:
        recipient = router.resolve(sender, member)
    except RoutingError as exc:
        raise ToolError(str(exc)) from exc
    return SendIntent(call.call_id, recipient, brief, context_id or None)


def _message_intent(call: ToolCall) -> MessageIntent:
    kind_name = call.args.get("type", "message")
    allowed = {"message", "shutdown_request", "plan_approval_response"}
    if kind_name not in allowed:
        raise ToolError(f"message: type must be one of {sorted(allowed)}, not {kind_name!r}")
    extra: dict[str, Any] = {}
    if kind_name == "plan_approval_response":
        approve = call.args.get("approve")
        if not isinstance(approve, bool):
            raise ToolError("message: plan_approval_response needs approve: true or false")
        extra["approve"] = approve
    return MessageIntent(
        call.call_id, _string(call, "to"), InboxKind(kind_name), _string(call, "content"), extra
    )


def _ask_intent(call: ToolCall) -> AskIntent:
    options = call.args.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ToolError("ask_human: options must be a list of strings")
    return AskIntent(call.call_id, _string(call, "question"), tuple(options))


def _dispatch_intent(call: ToolCall) -> DispatchIntent:
    task = call.args.get("task")
    if not isinstance(task, int) or isinstance(task, bool):
        raise ToolError(f"dispatch: task must be a task number (an integer), not {task!r}")
    allowance = call.args.get("allowance_usd")
    if allowance is not None and (
        not isinstance(allowance, int | float) or isinstance(allowance, bool) or allowance <= 0
    ):
        raise ToolError(f"dispatch: allowance_usd must be a positive number, not {allowance!r}")
    return DispatchIntent(
        call.call_id, task, _string(call, "brief"), None if allowance is None else float(allowance)
    )


def _refuse_double_sends(resolved: BusCalls) -> None:
    seen: set[str] = set()
    kept = []
    for send in resolved.sends:
        if send.context_id is not None and send.context_id in seen:
            resolved.refusals.append(
                ToolResult(
                    send.call_id,
                    f"send: one request at a time to {send.context_id!r}; combine them",
                    is_error=True,
                )
            )
            continue
        if send.context_id is not None:
            seen.add(send.context_id)
        kept.append(send)
    resolved.sends = kept


def _string(call: ToolCall, key: str) -> str:
    value = call.args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{call.name}: {key!r} must be a non-empty string")
    return value
