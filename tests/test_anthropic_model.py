"""AnthropicModel against the real SDK over a mock transport: mapping, caching, retries, errors."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import AsyncIterator
from typing import Any

import anthropic
import httpx2
import pytest

from orchestrator.agents.tools import SEND_SPEC
from orchestrator.config.prices import cost_usd
from orchestrator.core.errors import (
    ModelAuthError,
    ModelError,
    ModelRequestError,
    ModelUnavailableError,
)
from orchestrator.core.messages import (
    Message,
    ToolCall,
    ToolResult,
    Usage,
    assistant_content,
    tool_content,
)
from orchestrator.core.model import ModelRequest
from orchestrator.core.tools import ToolSpec
from orchestrator.models import anthropic as anthropic_model
from orchestrator.models.anthropic import (
    AnthropicModel,
    api_messages,
    request_params,
    retry_delay,
    turn_from_response,
)

BASE_URL = "https://api.anthropic.test"
KEY = "sk-ant-test-do-not-leak-0123456789"
# Not claude-sonnet-4-5: the SDK warns that it is deprecated, and warnings are errors here.
MODEL = "claude-haiku-4-5"
READ_SPEC = ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}})
EPHEMERAL = {"type": "ephemeral"}


def reply(content: list[dict[str, Any]], *, stop: str = "end_turn", **usage: int) -> dict[str, Any]:
    """A Messages API response body of the real shape."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 12,
            "output_tokens": 6,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
        }
        | usage,
    }


def error(status: int, kind: str, message: str, **headers: str) -> httpx2.Response:
    """An API error response of the real shape."""
    body = {"type": "error", "error": {"type": kind, "message": message}}
    return httpx2.Response(status, json=body, headers=headers)


def ok(body: dict[str, Any]) -> httpx2.Response:
    return httpx2.Response(200, json=body)


class FakeAPI:
    """Plays queued responses to POST /v1/messages and records each request body."""

    def __init__(self) -> None:
        self.responses: deque[httpx2.Response | Exception] = deque()
        self.bodies: list[dict[str, Any]] = []
        self.delays: list[float] = []

    def handle(self, request: httpx2.Request) -> httpx2.Response:
        assert (request.method, request.url.path) == ("POST", "/v1/messages"), request.url
        self.bodies.append(json.loads(request.content))
        response = self.responses.popleft()  # IndexError: a call nobody queued
        if isinstance(response, Exception):
            raise response
        return response

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)


@pytest.fixture
async def api() -> AsyncIterator[FakeAPI]:
    fake = FakeAPI()
    yield fake
    assert not fake.responses, "unplayed responses"


@pytest.fixture
async def client(api: FakeAPI) -> AsyncIterator[anthropic.AsyncAnthropic]:
    transport = httpx2.MockTransport(api.handle)
    async with httpx2.AsyncClient(transport=transport) as http:
        yield anthropic.AsyncAnthropic(
            api_key=KEY, base_url=BASE_URL, http_client=http, max_retries=0
        )


def make_model(
    api: FakeAPI, client: anthropic.AsyncAnthropic, *, model: str = MODEL, retries: int = 4
) -> AnthropicModel:
    return AnthropicModel(
        model=model,
        api_key=KEY,
        base_url=BASE_URL,
        max_retries=retries,
        sleep=api.sleep,
        client=client,
    )


def msg(seq: int, role: Any, **content: Any) -> Message:
    return Message("job:1", seq, "sender", role, content)


def request(
    *messages: Message, tools: tuple[ToolSpec, ...] = (SEND_SPEC, READ_SPEC)
) -> ModelRequest:
    return ModelRequest("coding/lead", "You lead the coding team.", messages, tools)


FIRST = msg(1, "user", text="Fix the login bug", kind="request", **{"from": "om"})


async def test_tool_use_then_end_turn_sends_the_result_back_with_cache_breakpoints(
    api: FakeAPI, client: anthropic.AsyncAnthropic
) -> None:
    tool_use = {"type": "tool_use", "id": "toolu_01", "name": "read_file", "input": {"p": "a"}}
    api.responses.append(
        ok(reply([{"type": "text", "text": "Reading."}, tool_use], stop="tool_use"))
    )
    api.responses.append(ok(reply([{"type": "text", "text": "Fixed."}])))
    model = make_model(api, client)

    first = await model.complete(request(FIRST))
    assert first.text == "Reading."
    assert first.tool_calls == (ToolCall("toolu_01", "read_file", {"p": "a"}),)
    assert first.usage == Usage(12, 6, 0, 0)

    result = msg(3, "tool", **tool_content(ToolResult("toolu_01", "contents")))
    second = await model.complete(
        request(FIRST, msg(2, "assistant", **assistant_content(first)), result)
    )
    assert second.text == "Fixed."
    assert second.tool_calls == ()

    body = api.bodies[1]
    assert (body["model"], body["max_tokens"]) == (MODEL, 8192)
    assert body["messages"][1]["content"][-1] == {"type": "tool_use", **tool_use}
    assert body["messages"][2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_01",
                "content": "contents",
                "is_error": False,
                "cache_control": EPHEMERAL,
            }
        ],
    }
    assert body["system"] == [
        {"type": "text", "text": "You lead the coding team.", "cache_control": EPHEMERAL}
    ]
    assert [tool.get("cache_control") for tool in body["tools"]] == [None, EPHEMERAL]
    assert json.dumps(body).count('"cache_control"') == 3


async def test_overloaded_then_success_backs_off(
    api: FakeAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.responses.extend([error(529, "overloaded_error", "Overloaded")] * 2)
    api.responses.append(ok(reply([{"type": "text", "text": "hi"}])))
    turn = await make_model(api, client).complete(request(FIRST))
    assert turn.text == "hi"
    assert api.delays == [1.0, 2.0]


async def test_rate_limit_honours_retry_after(
    api: FakeAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.responses.append(error(429, "rate_limit_error", "Slow down", **{"retry-after": "7"}))
    api.responses.append(ok(reply([{"type": "text", "text": "hi"}])))
    assert (await make_model(api, client).complete(request(FIRST))).text == "hi"
    assert api.delays == [7.0]


async def test_connection_error_is_retried(api: FakeAPI, client: anthropic.AsyncAnthropic) -> None:
    api.responses.append(httpx2.ConnectError("connection refused"))
    api.responses.append(ok(reply([{"type": "text", "text": "hi"}])))
    assert (await make_model(api, client).complete(request(FIRST))).text == "hi"
    assert api.delays == [1.0]


async def test_retries_exhausted(api: FakeAPI, client: anthropic.AsyncAnthropic) -> None:
    api.responses.extend([error(503, "api_error", "Internal error")] * 3)
    with pytest.raises(ModelUnavailableError, match="after 3 attempts: HTTP 503") as caught:
        await make_model(api, client, retries=2).complete(request(FIRST))
    assert caught.value.status == 503
    assert api.delays == [1.0, 2.0]


def test_retry_delay_prefers_the_server_hint_within_caps() -> None:
    assert retry_delay({"retry-after-ms": "1500", "retry-after": "2"}, 0) == 1.5
    assert retry_delay({"retry-after": "120"}, 0) == 60.0
    assert retry_delay({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 2) == 4.0
    assert [retry_delay({}, n) for n in range(7)] == [1, 2, 4, 8, 16, 30, 30]


async def test_rejected_key_fails_at_once_without_the_key(
    api: FakeAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.responses.append(error(401, "authentication_error", f"invalid x-api-key {KEY}"))
    with pytest.raises(ModelAuthError, match="ANTHROPIC_API_KEY was rejected") as caught:
        await make_model(api, client).complete(request(FIRST))
    assert KEY not in str(caught.value)
    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__
    assert (api.delays, len(api.bodies)) == ([], 1)


async def test_unknown_model_is_named(api: FakeAPI, client: anthropic.AsyncAnthropic) -> None:
    api.responses.append(error(404, "not_found_error", "model: claude-foo"))
    with pytest.raises(ModelRequestError, match="unknown model 'claude-foo'"):
        await make_model(api, client, model="claude-foo").complete(request(FIRST))
    assert api.delays == []


@pytest.mark.parametrize(
    ("status", "kind", "raised"),
    [(400, "invalid_request_error", ModelRequestError), (403, "permission_error", ModelAuthError)],
)
async def test_refused_request_carries_the_api_message(
    api: FakeAPI, client: anthropic.AsyncAnthropic, status: int, kind: str, raised: type[Exception]
) -> None:
    api.responses.append(error(status, kind, "max_tokens: 99999 > 64000"))
    with pytest.raises(raised, match=f"HTTP {status}.*max_tokens: 99999 > 64000"):
        await make_model(api, client).complete(request(FIRST))


async def test_usage_with_cache_tokens_is_priced(
    api: FakeAPI, client: anthropic.AsyncAnthropic
) -> None:
    usage = {
        "input_tokens": 1_000,
        "output_tokens": 500,
        "cache_read_input_tokens": 20_000,
        "cache_creation_input_tokens": 3_000,
    }
    api.responses.append(ok(reply([{"type": "text", "text": "hi"}], **usage)))
    turn = await make_model(api, client).complete(request(FIRST))
    assert turn.usage == Usage(1_000, 500, 20_000, 3_000)
    # $1 in, $5 out, $0.10 cache read, $1.25 cache write per million tokens:
    # 0.001 + 0.0025 + 0.002 + 0.00375
    assert cost_usd(MODEL, turn.usage) == pytest.approx(0.00925)


async def test_guard_refuses_a_model_without_an_injected_client() -> None:
    model = AnthropicModel.from_env({"ANTHROPIC_API_KEY": KEY}, model=MODEL)
    with pytest.raises(ModelError, match=r"real model requests are disabled \(tests\)"):
        await model.complete(request(FIRST))


async def test_missing_key_is_reported_before_any_request() -> None:
    anthropic_model.ALLOW_REQUESTS = True  # conftest restores it
    model = AnthropicModel.from_env({}, model=MODEL)
    with pytest.raises(ModelAuthError, match="ANTHROPIC_API_KEY is not set"):
        await model.complete(request(FIRST))


def test_from_env_builds_a_client_that_leaves_retries_to_us() -> None:
    anthropic_model.ALLOW_REQUESTS = True  # conftest restores it
    env = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": BASE_URL}
    model = AnthropicModel.from_env(env, model=MODEL)
    built = model._client_for_request()
    assert (str(built.base_url).rstrip("/"), built.max_retries) == (BASE_URL, 0)
    assert KEY not in repr(model)


def test_transcript_mapping_merges_results_and_labels_messages() -> None:
    send = {"id": "c1", "name": "send", "args": {"member": "dev", "message": "go"}}
    transcript = [
        FIRST,
        msg(2, "assistant", text="", tool_calls=[send, {**send, "id": "c2"}]),
        msg(3, "tool", call_id="c1", text="done", is_error=False, conversation_id="agent:a:b:1"),
        msg(4, "tool", call_id="c2", text="", is_error=True),
        msg(5, "user", text="look at auth.py", kind="message", **{"from": "coding/reviewer"}),
        msg(6, "user", text="", kind="shutdown_request", **{"from": "coding/lead"}),
        msg(7, "assistant", text=""),
        msg(8, "user", text="Earlier: ...", kind="compaction", covers_through=1),
    ]
    tool_use = {"type": "tool_use", "name": "send", "input": send["args"]}
    assert api_messages(transcript) == [
        {"role": "user", "content": [{"type": "text", "text": "Fix the login bug"}]},
        {
            "role": "assistant",
            "content": [{**tool_use, "id": "c1"}, {**tool_use, "id": "c2"}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "c1",
                    "content": "done\n(context_id: agent:a:b:1)",
                    "is_error": False,
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "c2",
                    "content": "(no output)",
                    "is_error": True,
                },
                {"type": "text", "text": "[message from coding/reviewer] look at auth.py"},
                {"type": "text", "text": "[shutdown_request from coding/lead]"},
                {"type": "text", "text": "[summary of the conversation so far] Earlier: ..."},
            ],
        },
    ]


def test_request_without_system_or_tools_marks_only_the_last_block() -> None:
    params = request_params(ModelRequest("a", "", (FIRST, msg(2, "user", text="and?")), ()))
    assert set(params) == {"messages"}
    assert params["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "Fix the login bug"},
                {"type": "text", "text": "and?", "cache_control": EPHEMERAL},
            ],
        }
    ]


def test_max_tokens_cut_keeps_its_text() -> None:
    body = reply(
        [{"type": "text", "text": "Half a"}, {"type": "text", "text": "nswer"}], stop="max_tokens"
    )
    assert turn_from_response(body).text == "Half answer"
    assert turn_from_response({"content": [], "usage": None}).usage == Usage()


async def test_an_error_without_a_json_body_still_fails_clearly(
    api: FakeAPI, client: anthropic.AsyncAnthropic
) -> None:
    api.responses.append(httpx2.Response(413, text="<html>request too large</html>"))
    with pytest.raises(ModelRequestError, match="HTTP 413.*no error message"):
        await make_model(api, client).complete(request(FIRST))


def test_a_tool_without_a_schema_takes_any_object() -> None:
    params = request_params(request(FIRST, tools=(ToolSpec("done", "Finish."),)))
    assert params["tools"] == [
        {
            "name": "done",
            "description": "Finish.",
            "input_schema": {"type": "object"},
            "cache_control": EPHEMERAL,
        }
    ]


@pytest.mark.parametrize(
    ("answer", "raised", "words"),
    [
        (
            error(401, "authentication_error", f"invalid x-api-key {KEY}"),
            ModelAuthError,
            "HTTP 401",
        ),
        (error(403, "permission_error", "no access"), ModelAuthError, "HTTP 403"),
        (error(529, "overloaded_error", "Overloaded"), ModelUnavailableError, "try again later"),
        (error(400, "invalid_request_error", "limit: bad"), ModelRequestError, "limit: bad"),
        (httpx2.ConnectError("refused"), ModelUnavailableError, f"cannot reach {BASE_URL}"),
    ],
)
async def test_the_key_check_says_what_is_wrong_without_the_key(
    answer: httpx2.Response | Exception, raised: type[ModelError], words: str
) -> None:
    asked: list[str] = []

    def handle(request: httpx2.Request) -> httpx2.Response:
        asked.append(f"{request.method} {request.url.path}?{request.url.query.decode()}")
        if isinstance(answer, Exception):
            raise answer
        return answer

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(handle)) as http:
        client = anthropic.AsyncAnthropic(
            api_key=KEY, base_url=BASE_URL, http_client=http, max_retries=0
        )
        model = AnthropicModel(model=MODEL, api_key=KEY, base_url=BASE_URL, client=client)
        with pytest.raises(raised, match=words) as caught:
            await model.check()
        listed = {"data": [], "has_more": False, "first_id": None, "last_id": None}
        answer = httpx2.Response(200, json=listed)
        await model.check()  # a key the API accepts: no error
    assert KEY not in str(caught.value)
    assert asked == ["GET /v1/models?limit=1"] * 2
