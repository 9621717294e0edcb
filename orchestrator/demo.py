"""The scripted organisation `teaparty run` uses with no ANTHROPIC_API_KEY.

It plays a lead and a worker deterministically, and everything it does is real: the lead
asks the decider to approve its plan (a gate), then Sends a brief; the worker writes a
file in its task worktree and commits it with the shell tool. It says in the file and in
its replies that it is the scripted stand-in for a model.
"""

from __future__ import annotations

from orchestrator.messages import AssistantTurn, ToolCall
from orchestrator.ports import ModelRequest

SCRIPTED_NOTE = "Written by TeaParty's scripted worker (no ANTHROPIC_API_KEY was set)."


class DemoModel:
    """A model for the demo lead and worker; the reply depends on the transcript alone."""

    def __init__(self, *, title: str, body: str, path: str) -> None:
        self.title = title
        self.body = body
        self.path = path

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The lead's or the worker's next turn."""
        if "send" in {tool.name for tool in request.tools}:  # only leads can send
            return self._lead(request)
        return self._worker(request)

    def _lead(self, request: ModelRequest) -> AssistantTurn:
        last = request.messages[-1]
        if len(request.messages) == 1:
            question = (
                f"Plan for {self.title!r}: one worker records the request in {self.path} "
                "and commits it on the job branch. Proceed?"
            )
            return _call("plan", "ask_human", question=question, options=["yes", "no"])
        if last.call_id == "plan":
            if not last.text.lower().rstrip(".").endswith("yes"):
                return AssistantTurn(text=f"Stopped before any work: {last.text}")
            brief = (
                f"Task: record this request in {self.path} and commit it.\n"
                f"Title: {self.title}\n\n{self.body}"
            )
            return _call("task-1", "send", member=self._member(request), message=brief)
        return AssistantTurn(text=f"Done. The worker reported: {last.text}")

    def _worker(self, request: ModelRequest) -> AssistantTurn:
        done = {m.call_id for m in request.messages if m.role == "tool"}
        if "write" not in done:
            content = f"# {self.title}\n\n{self.body}\n\n_{SCRIPTED_NOTE}_\n"
            return _call("write", "write_file", path=self.path, content=content)
        if "commit" not in done:
            command = f"git add -- {self.path} && git commit -q -m 'Record: {self.title}'"
            return _call("commit", "shell", command=command)
        return AssistantTurn(text=f"Committed {self.path}. ({SCRIPTED_NOTE})")

    @staticmethod
    def _member(request: ModelRequest) -> str:
        for line in request.system.splitlines():
            if line.startswith("You can send to: "):
                return line.removeprefix("You can send to: ").rstrip(".").split(", ")[0]
        raise LookupError("the demo lead has nobody to send to")


def _call(call_id: str, name: str, **args: object) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(call_id, name, args),))
