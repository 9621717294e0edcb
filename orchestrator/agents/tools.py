"""Tool declarations the model sees, and the bus tools the engine carries out itself.

`send` and `message` are not run like file tools: they become rows in the same
transaction as the assistant turn that called them (dispatch.record_turn).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.bus.dispatch import BusCalls, MessageIntent
from orchestrator.bus.extensions import TurnTool
from orchestrator.bus.gates import AskIntent
from orchestrator.bus.routing import Router
from orchestrator.bus.sends import SendIntent
from orchestrator.core.errors import RoutingError, ToolError
from orchestrator.core.messages import InboxKind, ToolCall, ToolResult
from orchestrator.core.tools import ToolSpec

SEND = "send"
MESSAGE = "message"
ASK_HUMAN = "ask_human"
# The bus's own tools; features add theirs as turn tools (orchestrator/bus/extensions.py),
# whose results arrive later too.
BUS_TOOLS = frozenset({SEND, MESSAGE, ASK_HUMAN})
# Calls whose result arrives later through the inbox, not from running the tool.
ANSWERED_LATER = frozenset({SEND, ASK_HUMAN})


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

BUS_SPECS: Mapping[str, ToolSpec] = {
    SEND: SEND_SPEC,
    MESSAGE: MESSAGE_SPEC,
    ASK_HUMAN: ASK_HUMAN_SPEC,
}


def resolve_bus_calls(
    calls: Sequence[ToolCall],
    *,
    sender: str,
    router: Router,
    tools: Mapping[str, TurnTool] | None = None,
) -> BusCalls:
    """Route every send, check every message and resolve each call of a feature's turn tool
    (`tools`); refusals go back to the model."""
    resolved = BusCalls()
    for call in calls:
        try:
            if call.name == SEND:
                resolved.sends.append(_send_intent(call, sender=sender, router=router))
            elif call.name == MESSAGE:
                resolved.messages.append(_message_intent(call))
            elif call.name == ASK_HUMAN:
                resolved.asks.append(_ask_intent(call))
            elif tools is not None and call.name in tools:
                resolved.effects.append((call.name, tools[call.name].resolve(call)))
        except ToolError as exc:
            resolved.refusals.append(ToolResult(call.call_id, str(exc), is_error=True))
    _refuse_double_sends(resolved)
    return resolved


def _send_intent(call: ToolCall, *, sender: str, router: Router) -> SendIntent:
    member = string_arg(call, "member")
    brief = string_arg(call, "message")
    context_id = call.args.get("context_id")
    if context_id is not None and not isinstance(context_id, str):
        raise ToolError("send: context_id must be a string")
    shared = call.args.get("shared")  # the engine's mini-teams only: not in send's schema
    if shared is not None and not isinstance(shared, str):
        raise ToolError("send: shared must be a string")
    try:
        recipient = router.resolve(sender, member)
    except RoutingError as exc:
        raise ToolError(str(exc)) from exc
    return SendIntent(call.call_id, recipient, brief, context_id or None, shared or None)


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
        call.call_id,
        string_arg(call, "to"),
        InboxKind(kind_name),
        string_arg(call, "content"),
        extra,
    )


def _ask_intent(call: ToolCall) -> AskIntent:
    options = call.args.get("options", [])
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ToolError("ask_human: options must be a list of strings")
    return AskIntent(call.call_id, string_arg(call, "question"), tuple(options))


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


def string_arg(call: ToolCall, key: str) -> str:
    """The call's argument `key`, a non-empty string (else ToolError)."""
    value = call.args.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"{call.name}: {key!r} must be a non-empty string")
    return value
