"""The Model port on the anthropic SDK: request and response mapping, retries, a test guard.

`anthropic` takes over a second to import, so it is imported only when a request is made;
importing this module (as tests/conftest.py does) stays cheap.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from itertools import groupby
from typing import TYPE_CHECKING, Any, Self

from orchestrator.core.errors import (
    ModelAuthError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
)
from orchestrator.core.messages import AssistantTurn, JSONObject, Message, ToolCall, Usage
from orchestrator.core.model import ModelRequest
from orchestrator.core.tools import ToolSpec

if TYPE_CHECKING:
    from anthropic import AsyncAnthropic

log = logging.getLogger(__name__)

# Tests set this to False (tests/conftest.py) so a model built without an injected client
# fails at once instead of reaching the network (cf. pydantic-ai ALLOW_MODEL_REQUESTS).
ALLOW_REQUESTS = True

DEFAULT_BASE_URL = "https://api.anthropic.com"
MAX_BACKOFF_SECONDS = 30.0
MAX_RETRY_AFTER_SECONDS = 60.0
_EPHEMERAL = {"type": "ephemeral"}
_PLAIN_KINDS = frozenset({None, "request"})
_LABELS = {"compaction": "summary of the conversation so far"}

Block = dict[str, Any]
Sleep = Callable[[float], Awaitable[None]]


def request_params(request: ModelRequest) -> dict[str, Any]:
    """The Messages API body for one request, without model and max_tokens; performs no I/O."""
    params: dict[str, Any] = {"messages": api_messages(request.messages)}
    if request.system:
        params["system"] = [{"type": "text", "text": request.system, "cache_control": _EPHEMERAL}]
    if request.tools:
        params["tools"] = api_tools(request.tools)
    if params["messages"]:
        params["messages"][-1]["content"][-1]["cache_control"] = _EPHEMERAL
    return params


def api_tools(tools: Sequence[ToolSpec]) -> list[Block]:
    """Tool definitions, the last one a cache breakpoint for the stable prefix."""
    blocks: list[Block] = [
        {
            "name": tool.name,
            "description": tool.description,
            "input_schema": dict(tool.input_schema) or {"type": "object"},
        }
        for tool in tools
    ]
    blocks[-1]["cache_control"] = _EPHEMERAL
    return blocks


def api_messages(transcript: Sequence[Message]) -> list[Block]:
    """The transcript as alternating API messages; user and tool runs merge into one."""
    shown = [m for m in transcript if m.role != "assistant" or m.text or m.tool_calls]
    out: list[Block] = []
    for is_assistant, run in groupby(shown, key=lambda m: m.role == "assistant"):
        batch = list(run)
        if is_assistant:
            out.extend({"role": "assistant", "content": _assistant_blocks(m)} for m in batch)
            continue
        results = [_tool_result(m.content) for m in batch if m.role == "tool"]
        texts: list[Block] = []
        for m in batch:
            if m.role == "user":
                texts += _shared_block(m.content, first=not out and not texts)
                texts += _text_blocks([_user_text(m.content)])
        if results or texts:
            out.append({"role": "user", "content": results + texts})
    return out


def _shared_block(content: JSONObject, *, first: bool) -> list[Block]:
    """What a mini-team's members are all sent first, as a block of its own and, opening
    the conversation, a cache breakpoint: the prefix a reviewer reads from the cache after
    its worker wrote it (tools, system and this block; the fourth and last breakpoint)."""
    shared = str(content.get("shared") or "")
    if not shared.strip():
        return []
    block: Block = {"type": "text", "text": shared}
    if first:
        block["cache_control"] = _EPHEMERAL
    return [block]


def _assistant_blocks(message: Message) -> list[Block]:
    uses = [
        {"type": "tool_use", "id": c.call_id, "name": c.name, "input": dict(c.args)}
        for c in message.tool_calls
    ]
    return _text_blocks([message.text]) + uses


def _text_blocks(texts: Iterable[str]) -> list[Block]:
    return [{"type": "text", "text": text} for text in texts if text.strip()]


def _user_text(content: JSONObject) -> str:
    text = str(content.get("text", ""))
    kind = content.get("kind")
    if kind in _PLAIN_KINDS:
        return text
    sender = content.get("from")
    label = _LABELS.get(str(kind)) or (f"{kind} from {sender}" if sender else str(kind))
    return f"[{label}] {text}" if text else f"[{label}]"


def _tool_result(content: JSONObject) -> Block:
    text = str(content.get("text", ""))
    if context_id := content.get("conversation_id"):
        # The agent continues that conversation by passing this id to `send`.
        text = f"{text}\n(context_id: {context_id})" if text else f"(context_id: {context_id})"
    return {
        "type": "tool_result",
        "tool_use_id": str(content["call_id"]),
        # The API refuses an empty error result; an empty output says so in words.
        "content": text or "(no output)",
        "is_error": bool(content.get("is_error", False)),
    }


def turn_from_response(body: Mapping[str, Any]) -> AssistantTurn:
    """An assistant turn from a Messages API response body; a max_tokens cut keeps its text."""
    blocks: Sequence[Mapping[str, Any]] = body.get("content") or ()
    text = "".join(str(b.get("text", "")) for b in blocks if b.get("type") == "text")
    calls = tuple(
        ToolCall(str(b["id"]), str(b["name"]), dict(b.get("input") or {}))
        for b in blocks
        if b.get("type") == "tool_use"
    )
    usage: Mapping[str, Any] = body.get("usage") or {}
    return AssistantTurn(
        text=text,
        tool_calls=calls,
        usage=Usage(
            input_tokens=int(usage.get("input_tokens") or 0),
            output_tokens=int(usage.get("output_tokens") or 0),
            cache_read_tokens=int(usage.get("cache_read_input_tokens") or 0),
            cache_write_tokens=int(usage.get("cache_creation_input_tokens") or 0),
        ),
    )


def retry_delay(headers: Mapping[str, str], attempt: int) -> float:
    """Seconds before retry number `attempt` (from 0): the server's hint, else backoff."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            seconds = float(headers.get(name, "")) * scale
        except ValueError:  # absent, or an HTTP date: fall back to backoff
            continue
        if math.isfinite(seconds) and seconds >= 0:
            return min(seconds, MAX_RETRY_AFTER_SECONDS)
    return min(2.0**attempt, MAX_BACKOFF_SECONDS)


def is_retryable(status: int) -> bool:
    """Whether a failed call with this HTTP status may succeed if tried again."""
    return status in (408, 409, 429) or status >= 500


class AnthropicModel:
    """A Model that calls the Anthropic Messages API, retrying transient failures itself."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str | None,
        max_tokens: int = 8192,
        max_retries: int = 4,
        sleep: Sleep = asyncio.sleep,
        client: AsyncAnthropic | None = None,
    ) -> None:
        self.model = model
        self.base_url = base_url or DEFAULT_BASE_URL
        self.max_tokens = max_tokens
        self.max_retries = max_retries
        self._api_key = api_key
        self._sleep = sleep
        self._client = client
        self._injected = client is not None

    @classmethod
    def from_env(cls, env: Mapping[str, str], *, model: str) -> Self:
        """A model configured from ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL in `env`."""
        return cls(
            model=model,
            api_key=env.get("ANTHROPIC_API_KEY") or None,
            base_url=env.get("ANTHROPIC_BASE_URL") or None,
        )

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """Return the assistant's next turn, retrying overload, rate limits and lost connections."""
        client = self._client_for_request()
        import anthropic

        params = request_params(request)
        attempt = 0
        while True:
            try:
                response = await client.messages.create(
                    model=self.model, max_tokens=self.max_tokens, **params
                )
            except anthropic.APIStatusError as exc:
                if (fatal := self._fatal_error(exc.status_code, exc.body)) is not None:
                    # A 401 body may echo the credential, so it is not chained.
                    raise fatal from (None if fatal.status == 401 else exc)
                failure, status = f"HTTP {exc.status_code}", exc.status_code
                delay = retry_delay(exc.response.headers, attempt)
            except anthropic.APIConnectionError as exc:
                failure, status, delay = f"connection failed: {exc}", None, retry_delay({}, attempt)
            else:
                return turn_from_response(response.model_dump(mode="json"))
            if attempt == self.max_retries:
                raise ModelUnavailableError(
                    f"model {self.model!r} unavailable after {attempt + 1} attempts: {failure}",
                    status=status,
                    retry_after=delay,
                )
            log.warning("model %r: %s; retrying in %.1fs", self.model, failure, delay)
            await self._sleep(delay)
            attempt += 1

    async def check(self, *, timeout_s: float = 15.0) -> None:
        """One cheap authenticated call (list one model), so a missing, refused or unreachable
        key is found before any job starts: ModelAuthError, or ModelUnavailableError."""
        client = self._client_for_request()
        import anthropic

        try:
            await client.with_options(timeout=timeout_s).models.list(limit=1)
        except anthropic.APIStatusError as exc:
            if exc.status_code in (401, 403):
                raise ModelAuthError(
                    f"ANTHROPIC_API_KEY was rejected (HTTP {exc.status_code}) by {self.base_url}",
                    status=exc.status_code,
                ) from None
            if is_retryable(exc.status_code):
                raise ModelUnavailableError(
                    f"{self.base_url} answered HTTP {exc.status_code}; try again later",
                    status=exc.status_code,
                ) from None
            raise ModelRequestError(
                f"{self.base_url} refused the key check (HTTP {exc.status_code}):"
                f" {_api_message(exc.body)}",
                status=exc.status_code,
            ) from None
        except anthropic.APIConnectionError as exc:
            raise ModelUnavailableError(f"cannot reach {self.base_url}: {exc}") from None

    def _client_for_request(self) -> AsyncAnthropic:
        if not self._injected and not ALLOW_REQUESTS:
            raise ModelError("real model requests are disabled (tests)")
        if self._client is None:
            if self._api_key is None:
                raise ModelAuthError("ANTHROPIC_API_KEY is not set")
            from anthropic import AsyncAnthropic

            # Our own loop retries (with the injected sleep), so the SDK must not.
            self._client = AsyncAnthropic(
                api_key=self._api_key, base_url=self.base_url, max_retries=0
            )
        return self._client

    def _fatal_error(self, status: int, body: object) -> ModelError | None:
        """The error to raise at once for a status no retry can fix, or None to retry."""
        if is_retryable(status):
            return None
        if status == 401:
            # The API's own message is left out: nothing about the key may reach a log.
            return ModelAuthError(
                f"ANTHROPIC_API_KEY was rejected (HTTP 401) by {self.base_url}", status=status
            )
        detail = _api_message(body)
        if status == 403:
            message = f"ANTHROPIC_API_KEY may not use model {self.model!r} (HTTP 403): {detail}"
            return ModelAuthError(message, status=status)
        if status == 404:
            message = f"unknown model {self.model!r} at {self.base_url} (HTTP 404): {detail}"
            return ModelRequestError(message, status=status)
        message = f"model {self.model!r} refused the request (HTTP {status}): {detail}"
        return ModelRequestError(message, status=status)


def _api_message(body: object) -> str:
    """The `error.message` of an API error body, if it has one."""
    error = body.get("error") if isinstance(body, Mapping) else None
    message = error.get("message") if isinstance(error, Mapping) else None
    return message if isinstance(message, str) else "no error message"
