"""What the model sees of a conversation, and compaction when that grows past its bound.

A compaction is a summary the model wrote of everything before the turn in progress,
persisted as a `compaction` message. The model then sees that summary followed by the
kept tail: the last assistant turn with its tool results (tool_use and tool_result
blocks stay paired), or the new messages after a finished turn.
"""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.core.messages import Message

COMPACTION = "compaction"
COMPACT_INSTRUCTION = (
    "Your conversation is about to be compacted: everything above will be replaced by what "
    "you write now. Write a complete working summary for yourself: the request you are "
    "serving and who sent it, decisions made and why, what is done, what is in progress, "
    "open questions, and every identifier you still need (files, branches, task numbers, "
    "context_ids of conversations you may continue). Facts only; no tool calls."
)
CHARS_PER_TOKEN = 4


def is_compaction(message: Message) -> bool:
    """Whether a message is a persisted compaction summary."""
    return message.role == "user" and message.content.get("kind") == COMPACTION


def model_view(transcript: Sequence[Message]) -> tuple[Message, ...]:
    """The transcript as the model sees it: the last compaction, then what it did not cover."""
    for message in reversed(transcript):
        if is_compaction(message):
            covered = int(message.content["covers_through"])
            kept = [m for m in transcript if m.seq > covered and m is not message]
            return (message, *kept)
    return tuple(transcript)


def estimate_tokens(messages: Sequence[Message]) -> int:
    """A rough token count of messages (characters / 4)."""
    return sum(m.size for m in messages) // CHARS_PER_TOKEN


def kept_tail_start(view: Sequence[Message]) -> int:
    """Index in `view` where the part a compaction must keep begins."""
    for index in range(len(view) - 1, -1, -1):
        if view[index].role == "assistant":
            return index if view[index].tool_calls else index + 1
    return len(view)


def compaction_point(view: Sequence[Message], *, bound: int) -> int | None:
    """The seq a compaction would cover through, or None if it is not needed or cannot help."""
    if estimate_tokens(view) <= bound:
        return None
    start = kept_tail_start(view)
    covered = view[:start]
    if len(covered) < 2 or (len(covered) == 1 and is_compaction(covered[0])):
        return None
    return covered[-1].seq
