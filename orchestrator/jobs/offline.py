"""The scripted organisation `teaparty run` uses with no ANTHROPIC_API_KEY.

It plays every role deterministically, and everything it does is real: the office
manager hands the job to the project lead (restating it with the decider's words when they
did not approve its brief at an intent gate); the lead puts one task on the board and
dispatches it, which the engine first puts to the decider as the plan (a gate); the task
then runs (a one-task job flattens to one mini-team); the worker writes a file in its task
worktree, which the engine commits; the reviewer reads the file and approves; the engine
merges; the proxy predicts the first option at each gate. None of it needs a shell, so it
runs where agents' shells cannot be sandboxed. It says in the file and in its replies
that it is the scripted stand-in for a model.
"""

from __future__ import annotations

import re

from orchestrator.core.messages import AssistantTurn, ToolCall
from orchestrator.core.model import ModelRequest
from orchestrator.proxy.brief import BRIEF_OPENING
from orchestrator.teams.briefs import PHASE_OPENING, REVIEW_OPENING
from orchestrator.workspace.git import slug

SCRIPTED_NOTE = "Written by TeaParty's scripted worker (no ANTHROPIC_API_KEY was set)."
_TITLE = re.compile(r"^(?:Job[^:\n]*): (.+)$", re.MULTILINE)
_ISSUE = re.compile(r"<issue>\n(.*?)\n</issue>", re.DOTALL)
_ROUND = re.compile(r"Review round (\d+) on the job's pull request")
_POINT = re.compile(r"^Point (\d+), from", re.MULTILINE)
_TASK = re.compile(r"#(\d+)")
_ENGINE_TASK = re.compile(r"Task #(\d+), made by the engine")
_SPEC = re.compile(
    r"Record this request in (\S+) and commit it\.\nTitle: (.*)\n\n<issue>\n(.*?)\n</issue>",
    re.DOTALL,
)


class DemoModel:
    """A model for every demo role; the reply depends on the transcript alone."""

    def __init__(
        self, *, title: str | None = None, body: str | None = None, path: str | None = None
    ) -> None:
        self.title = title
        self.body = body
        self.path = path

    def _job(self, request: ModelRequest) -> tuple[str, str, str]:
        """The job's title, text and file: as given, or read from the brief (many jobs)."""
        if self.title is not None and self.body is not None and self.path is not None:
            return self.title, self.body, self.path
        first = request.messages[0].text if request.messages else ""
        title = _TITLE.search(first)
        body = _ISSUE.search(first)
        name = title.group(1).strip() if title else "the request"
        return name, body.group(1).strip() if body else name, f"docs/requests/{slug(name)}.md"

    async def complete(self, request: ModelRequest) -> AssistantTurn:
        """The next turn of whichever role is asking (told apart by its tools, or, for the
        proxy, which has none here, by its brief)."""
        if request.messages and request.messages[0].text.startswith(BRIEF_OPENING):
            return _proxy(request.messages[0].text)
        tools = {tool.name for tool in request.tools}
        if "dispatch" in tools:
            return self._lead(request)
        if "send" in tools:
            return self._office_manager(request)
        # A mini-team's members are sent the same tools: a reviewer's brief says its role.
        role = request.messages[0].text if request.messages else ""
        if "write_file" in tools and not role.startswith((REVIEW_OPENING, PHASE_OPENING)):
            return self._worker(request)
        return self._reviewer(request)

    def _office_manager(self, request: ModelRequest) -> AssistantTurn:
        fresh = _since_last_turn(request)
        if fresh and _ROUND.match(fresh[0]):  # a review round (and what the engine added)
            number = _found(_ROUND, fresh[0])
            brief = "\n\n".join(fresh)
            return _call(f"round-{number}", "send", member=_lead_name(request), message=brief)
        results = [m for m in request.messages if m.role == "tool"]
        last = results[-1] if results else None
        unapproved = last is not None and "did not approve this restatement" in last.text
        if last is None or unapproved:
            title, body, _ = self._job(request)
            brief = f"Job: {title}\n\n<issue>\n{body}\n</issue>\nPlan it and have it done."
            if last is not None:  # the decider's words on the brief: restated with them
                brief += f"\n\nAs the decider asked: {last.text}"
            call_id = f"job-{len(results) + 1}" if results else "job"
            return _call(call_id, "send", member=_lead_name(request), message=brief)
        return AssistantTurn(text=last.text)

    def _round(self, request: ModelRequest) -> AssistantTurn:
        """A review round: one task records the points, then every point is answered in
        one turn (one a turn, a round of more points than the lead's `max_turns` would stop
        with the rest unanswered)."""
        brief = request.messages[0].text
        number = _found(_ROUND, brief)
        path = f"docs/reviews/round-{number}.md"
        done = {m.call_id: m for m in request.messages if m.role == "tool"}
        points = _POINT.findall(brief)
        if "task" not in done:
            spec = (
                f"Record this request in {path} and commit it.\nTitle: Review round {number}\n\n"
                f"<issue>\n{brief}\n</issue>\n\nAcceptance: {path} lists every point."
            )
            return _call(
                "task", "task_create", title=f"Review round {number}", spec=spec, review="spec-only"
            )
        if "run" not in done:
            return _call(
                "run",
                "dispatch",
                task=int(_found(_TASK, done["task"].text)),
                brief=f"Write {path}.",
            )
        for made in _ENGINE_TASK.findall(brief):  # a task the engine put on the board
            if f"engine-{made}" not in done:
                return _call(
                    f"engine-{made}", "dispatch", task=int(made), brief="As its spec says."
                )
        answers = tuple(
            self._answer(brief, int(point), path)
            for point in dict.fromkeys(points)  # a reviewer may quote a point's heading
            if f"answer-{point}" not in done
        )
        if answers:  # all in one turn, as a model calls tools in parallel
            return AssistantTurn(tool_calls=answers)
        return AssistantTurn(
            text=f"Review round {number}: {len(points)} point(s) recorded in "
            f"{path}. {done['run'].text}"
        )

    @staticmethod
    def _answer(brief: str, point: int, path: str) -> ToolCall:
        """The lead's answer to one point: a reviewer's suggestion applied as written."""
        args: dict[str, object] = {"point": point, "action": "change"}
        if re.search(rf"^Point {point}, from .*holds a suggestion", brief, re.MULTILINE):
            args |= {"reply": f"Applied as suggested. ({SCRIPTED_NOTE})", "apply_suggestion": True}
        else:
            args["reply"] = f"Recorded in {path}. ({SCRIPTED_NOTE})"
        return ToolCall(f"answer-{point}", "answer_review", args)

    def _lead(self, request: ModelRequest) -> AssistantTurn:
        if request.messages and _ROUND.match(request.messages[0].text):
            return self._round(request)
        # Where the lead is comes from its newest tool result: a person's direction
        # (`/steer`) or an advisor's words may come between, and are carried along.
        results = [m for m in request.messages if m.role == "tool"]
        last = results[-1] if results else request.messages[-1]
        title, body, path = self._job(request)
        heard = [
            m.text for m in request.messages if m.role == "user" and m is not request.messages[0]
        ]
        if not any(m.role == "assistant" for m in request.messages):
            spec = (
                f"Record this request in {path} and commit it.\nTitle: {title}\n\n"
                f"<issue>\n{body}\n</issue>\n\nAcceptance: {path} exists and quotes the request."
            )
            spec += "".join(f"\n\nHeard: {text}" for text in heard)
            return _call("task", "task_create", title=title[:70], spec=spec, review="spec-only")
        if last.call_id in ("task", "replan"):  # the engine puts the plan to the decider first
            number = 1 if last.call_id == "task" else 2
            return _call(f"run{number}", "dispatch", task=number, brief=f"Write {path}.")
        if last.call_id in ("run1", "run2") and "plan was not approved" in last.text:
            # Its task is cancelled; with the decider's words (the first time), planned again.
            again = "changed" if last.call_id == "run1" and _asked_change(request) else "dropped"
            return _call(again, "task_update", number=int(last.call_id[-1]), state="cancelled")
        if last.call_id == "dropped":
            said = next(
                (_SAID.search(m.text) for m in reversed(results) if _SAID.search(m.text)), None
            )
            how = f" ({said.group(1)})" if said else ""
            return AssistantTurn(text=f"The plan was rejected{how}, so nothing was done.")
        if last.call_id == "changed":
            spec = (
                f"Record this request in {path} and commit it.\nTitle: {title}\n\n"
                f"<issue>\n{body}\n</issue>\n\nChanged as the decider asked: "
                f"{_asked_change(request)}\n\nAcceptance: {path} exists and quotes the request."
            )
            return _call("replan", "task_create", title=title[:70], spec=spec, review="spec-only")
        heard_too = "".join(f"\nHeard: {text}" for text in heard)
        return AssistantTurn(text=f"Done. {last.text}{heard_too}")

    def _worker(self, request: ModelRequest) -> AssistantTurn:
        done = {m.call_id for m in request.messages if m.role == "tool"}
        spec = request.messages[0].whole_text if request.messages else ""
        if "This task merges the base branch" in spec:
            return AssistantTurn(
                text="blocked: the scripted worker cannot resolve merge conflicts; a person "
                f"(or a model) must. ({SCRIPTED_NOTE})"
            )
        found = _SPEC.search(spec)
        title, body, path = (
            (found.group(2), found.group(3).strip(), found.group(1))
            if found
            else self._job(request)
        )
        if "write" not in done:
            content = f"# {title}\n\n{body}\n\n_{SCRIPTED_NOTE}_\n"
            return _call("write", "write_file", path=path, content=content)
        return AssistantTurn(text=f"Record: {title}\n\nWrote {path}. ({SCRIPTED_NOTE})")

    def _reviewer(self, request: ModelRequest) -> AssistantTurn:
        found = _SPEC.search(request.messages[0].whole_text if request.messages else "")
        if "read" not in {m.call_id for m in request.messages} and found:
            return _call("read", "read_file", path=found.group(1))
        return AssistantTurn(text="approve\nThe scripted reviewer read the file.")


def _proxy(brief: str) -> AssistantTurn:
    """The scripted proxy predicts the first option offered (`yes` when none is)."""
    found = re.search(r"^Options: (.*)\.$", brief, re.MULTILINE)
    options = found.group(1) if found else ""
    first = "yes" if not found or options.startswith("none") else options.split(", ")[0]
    return AssistantTurn(
        text=f"answer: {first}\nconfidence: 0.7\nreasons: The scripted proxy predicts the "
        "first option offered; it has no model to read the decider's history with."
    )


def _lead_name(request: ModelRequest) -> str:
    first = request.messages[0].text if request.messages else ""
    project = re.search(r"\(project ([\w.-]+)\)", first)
    if project:  # the project's name is an alias for its lead, unique among many projects
        return project.group(1)
    for line in request.system.splitlines():
        if line.startswith("You can send to: "):
            names = line.removeprefix("You can send to: ").rstrip(".").split(", ")
            return next(name for name in names if name != "proxy")
    raise LookupError("the demo office manager has nobody to send to")


def _since_last_turn(request: ModelRequest) -> list[str]:
    """The texts of the user messages after the agent's last turn, oldest first."""
    fresh: list[str] = []
    for message in reversed(request.messages):
        if message.role == "assistant":
            break
        if message.role == "user":
            fresh.insert(0, message.text)
    return fresh


def _found(pattern: re.Pattern[str], text: str) -> str:
    """The first group of `pattern` in `text`, which the caller knows it matches."""
    match = pattern.search(text)
    if match is None:
        raise LookupError(f"the scripted model expected {pattern.pattern!r} in what it read")
    return match.group(1)


_SAID = re.compile(r"the plan was not approved \((.+?)\)\. ", re.S)  # who answered what
# A rejected plan's refusal names the answer as given: `no (what to change)` carries words.
_REJECTED_WITH = re.compile(r"""answered (['"])no \((.+)\)\1\)""", re.S)


def _asked_change(request: ModelRequest) -> str | None:
    """What the decider asked to change when they rejected the first plan, if they said."""
    for message in request.messages:
        if message.role == "tool" and message.call_id == "run1":
            found = _REJECTED_WITH.search(message.text)
            return found.group(2).strip() if found else None
    return None


def _call(call_id: str, name: str, **args: object) -> AssistantTurn:
    return AssistantTurn(tool_calls=(ToolCall(call_id, name, args),))
