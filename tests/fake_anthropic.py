"""A local stand-in for the Anthropic Messages API that plays the scripted organisation.

`teaparty` reaches it through ANTHROPIC_BASE_URL, as it would reach the API, with the
anthropic SDK: each request is read back into the engine's own request, answered by the
scripted stand-in (DemoModel, the roles `teaparty demo` plays), and recorded with when it
came and when it was answered. A test may make calls slow (`delay`), as a model is.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from orchestrator.api import AssistantTurn, DemoModel, ModelRequest
from orchestrator.core.messages import Message
from orchestrator.core.tools import ToolSpec
from orchestrator.jobs.flat_lead import TRIAGE
from orchestrator.proxy.brief import BRIEF_OPENING
from orchestrator.teams.briefs import PHASE_OPENING, REVIEW_OPENING

KEY = "sk-ant-stand-in"


@dataclass(frozen=True)
class Call:
    """One model call as the stand-in saw it."""

    request: ModelRequest
    key: str  # the request as sent: a call made twice has the same key
    started: float
    ended: float

    @property
    def role(self) -> str:
        """Which role asked."""
        return role(self.request)


def role(request: ModelRequest) -> str:
    """Which role asks, told apart as the scripted model tells them."""
    tools = {tool.name for tool in request.tools}
    first = request.messages[0].text if request.messages else ""
    if first.startswith(BRIEF_OPENING):
        return "proxy"
    if request.system == TRIAGE:
        return "triage"  # the project lead's model, asked whether the job is one change
    if first.startswith((REVIEW_OPENING, PHASE_OPENING)):
        return "reviewer"  # a mini-team's members are sent the same tools
    roles = {"dispatch": "lead", "send": "office manager", "write_file": "worker"}
    return next((name for tool, name in roles.items() if tool in tools), "reviewer")


class FakeAnthropic(ThreadingHTTPServer):
    """POST /v1/messages answered by the scripted organisation; every call kept in `calls`."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.model = DemoModel()
        self.calls: list[Call] = []
        self.delay: Callable[[ModelRequest], float] = lambda request: 0.0
        self.tokens = 0  # the input tokens each reply says it used
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        """Where ANTHROPIC_BASE_URL points."""
        return f"http://127.0.0.1:{self.server_address[1]}"

    def env(self) -> dict[str, str]:
        """The environment that makes `teaparty` call this stand-in."""
        return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": self.url}

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request, after the request's delay; the call recorded."""
        started = time.time()
        request = model_request(body)
        time.sleep(self.delay(request))  # a model takes its time; this one as told
        turn = asyncio.run(self.model.complete(request))
        key = json.dumps([body.get("system"), body.get("messages")], sort_keys=True)
        with self._lock:
            self.calls.append(Call(request, key, started, time.time()))
        return api_reply(turn, tokens=self.tokens)


@contextmanager
def fake_anthropic() -> Iterator[FakeAnthropic]:
    """The stand-in, serving in a thread of its own until the block ends."""
    server = FakeAnthropic()
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: FakeAnthropic

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        bearer = self.headers.get("authorization", "").removeprefix("Bearer ")
        if KEY not in (self.headers.get("x-api-key"), bearer):  # the SDK sends either
            self.send_error(401)
            return
        if self.path.split("?")[0] != "/v1/messages":
            self.send_error(404)
            return
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        data = json.dumps(self.server.answer(body)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def model_request(body: dict[str, Any]) -> ModelRequest:
    """The engine's request back from the Messages API body it was sent as."""
    system = "".join(block["text"] for block in body.get("system") or ())
    tools = tuple(ToolSpec(t["name"], t.get("description", "")) for t in body.get("tools") or ())
    messages: list[Message] = []
    for sent in body["messages"]:
        for role, content in _contents(sent):
            messages.append(Message("stand-in", len(messages) + 1, "", role, content))
    return ModelRequest("", system, tuple(messages), tools)


def _contents(sent: dict[str, Any]) -> Iterator[tuple[Any, dict[str, Any]]]:
    """Each transcript entry one API message carries: an assistant turn, or its user and
    tool blocks one by one."""
    blocks = sent["content"]
    if sent["role"] == "assistant":
        text = "".join(b["text"] for b in blocks if b["type"] == "text")
        calls = [
            {"id": b["id"], "name": b["name"], "args": b["input"]}
            for b in blocks
            if b["type"] == "tool_use"
        ]
        yield "assistant", {"text": text, "tool_calls": calls}
        return
    shared: str | None = None
    for n, block in enumerate(blocks):
        if block["type"] == "tool_result":
            yield "tool", {"call_id": block["tool_use_id"], "text": block["content"]}
        elif n == 0 and "cache_control" in block and len(blocks) > 1:
            shared = block["text"]  # what a mini-team's members share, then the member's own
        elif shared is not None:
            yield "user", {"shared": shared, "text": block["text"]}
            shared = None
        else:
            yield "user", {"text": block["text"]}


def api_reply(turn: AssistantTurn, *, tokens: int = 0) -> dict[str, Any]:
    """A Messages API response body carrying `turn`."""
    content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}] if turn.text else []
    content += [
        {"type": "tool_use", "id": c.call_id, "name": c.name, "input": dict(c.args)}
        for c in turn.tool_calls
    ]
    return {
        "id": f"msg_{id(turn)}",
        "type": "message",
        "role": "assistant",
        "model": "stand-in",
        "content": content,
        "stop_reason": "tool_use" if turn.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": tokens, "output_tokens": 0},
    }
