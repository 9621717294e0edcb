"""A scripted organisation doing one job on a real repository through the whole hierarchy.

The job: four tasks. #1 and #2 are independent and both retitle the README (a deliberate
merge conflict); #3 depends on both; #4 has `review: none`. The project lead plans and
sends the batch to the coding lead, who dispatches #1, #2 and #4 at once, turns the
conflict into a resolution task (#5), then dispatches #3. The spec reviewer asks for one
change on task #1 in round 1. After the last merge the phase reviewer asks for a
changelog (task #6), then approves. Every reply is a function of the transcript, so a
restarted engine gets the same answers.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from orchestrator.api import load_project
from orchestrator.config import load_organisation, shipped_org_dir
from orchestrator.core.messages import AssistantTurn, Message, ToolCall
from orchestrator.core.model import Model, ModelRequest
from orchestrator.jobs.handle import JobHandle
from orchestrator.jobs.office import JobSource, Office
from orchestrator.models.scripted import FunctionModel
from orchestrator.sandbox.probe import probe

ENV = {
    "GIT_AUTHOR_NAME": "worker",
    "GIT_AUTHOR_EMAIL": "worker@example.com",
    "GIT_COMMITTER_NAME": "worker",
    "GIT_COMMITTER_EMAIL": "worker@example.com",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
    "PATH": "/usr/bin:/bin",
}
# These tests are about teams; the plan and merge-conflict gates have their own tests
# (test_conflict_gate.py for the merge conflict this job makes).
PROJECT = "humans: {decider: alice}\nparallel: 3\ngates: {plan: never, merge-conflict: never}\n"
TASKS = [
    (
        "Retitle the README for alpha",
        "README.md's first line becomes `widgets: alpha`.",
        [],
        "full",
    ),
    ("Retitle the README for beta", "README.md's first line becomes `widgets: beta`.", [], "full"),
    ("Add combine.py", "combine.py imports alpha and beta.", [1, 2], "spec-only"),
    ("Add docs/notes.md", "A notes file.", [], "none"),
]
# What each task's worker writes: task number -> (path, content).
FILES = {
    1: [("README.md", "widgets: alpha\n"), ("alpha.py", "ALPHA = 1\n")],
    2: [("README.md", "widgets: beta\n"), ("beta.py", "BETA = 2\n")],
    3: [("combine.py", "from alpha import ALPHA\nfrom beta import BETA\n")],
    4: [("docs/notes.md", "notes\n")],
    5: [("README.md", "widgets: alpha and beta\n")],
    6: [("CHANGELOG.md", "- alpha, beta, combine\n")],
}


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=ENV
    ).stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("widgets\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "init")
    return path


def call(call_id: str, name: str, **args: object) -> ToolCall:
    return ToolCall(call_id, name, args)


def turn(*calls: ToolCall, text: str = "") -> AssistantTurn:
    return AssistantTurn(text=text, tool_calls=calls)


def last_request(messages: tuple[Message, ...]) -> tuple[str, int]:
    """The text of the last request and how many tool results followed it."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            after = sum(m.role == "tool" for m in messages[index + 1 :])
            return messages[index].text, after
    return "", 0


def results(messages: tuple[Message, ...]) -> list[str]:
    return [m.text for m in messages if m.role == "tool"]


def office_manager(request: ModelRequest) -> AssistantTurn:
    done = results(request.messages)
    if not done:
        brief = "Job: widgets issue 'Alpha and beta'. Plan it and have it done."
        return turn(call("om-1", "send", member="widgets", message=brief))
    return AssistantTurn(text=f"Job done. The project lead reported: {done[-1]}")


def project_lead(request: ModelRequest) -> AssistantTurn:
    done = results(request.messages)
    if not done:
        creates = [
            call(f"plan-{n}", "task_create", title=t, spec=s, blocked_by=b, review=r)
            for n, (t, s, b, r) in enumerate(TASKS, start=1)
        ]
        return turn(*creates)
    if len(done) == len(TASKS):
        brief = "Run tasks #1, #2, #4, then #3 when #1 and #2 are done. Reply per task."
        return turn(call("to-coding", "send", member="coding", message=brief))
    return AssistantTurn(text=f"All tasks merged. Coding lead: {done[-1]}")


def coding_lead(request: ModelRequest) -> AssistantTurn:
    done = results(request.messages)
    calls_made = {c.call_id for m in request.messages for c in m.tool_calls}
    brief = "Files are at the repository root."
    if not done:
        return turn(*(call(f"d-{n}", "dispatch", task=n, brief=brief) for n in (1, 2, 4)))
    conflict = next((t for t in done if "conflicts with the job branch" in t), None)
    if conflict and "resolve" not in calls_made:
        number = int(re.search(r"Task #(\d+)", conflict).group(1))  # type: ignore[union-attr]
        spec = f"Merge task #{number}'s branch; README.md's first line: `widgets: alpha and beta`."
        return turn(
            call("resolve", "task_create", title="Resolve README", spec=spec, resolves=number)
        )
    if "resolve" in calls_made and "d-5" not in calls_made:
        return turn(call("d-5", "dispatch", task=5, brief="Resolve the README conflict."))
    if "d-5" in calls_made and "d-3" not in calls_made:
        return turn(call("d-3", "dispatch", task=3, brief=brief))
    if "now tasks #6" in done[-1] and "d-6" not in calls_made:
        return turn(call("d-6", "dispatch", task=6, brief="Add the changelog."))
    return AssistantTurn(text="Tasks 1-6 merged; the phase review approved.")


def task_number(text: str) -> int:
    match = re.search(r"task #(\d+)", text, re.IGNORECASE)
    assert match, text
    return int(match.group(1))


def implementer(request: ModelRequest) -> AssistantTurn:
    first = request.messages[0].text
    number = task_number(first)
    text, after = last_request(request.messages)
    files = FILES[number]
    if text.startswith("Review round"):
        files = [(f"fix-{number}.txt", "fixed\n")]
    if after < len(files):
        path, content = files[after]
        return turn(call(f"w{after}", "write_file", path=path, content=content))
    return AssistantTurn(text=f"Task {number}: wrote {', '.join(p for p, _ in files)}.")


def reviewer(request: ModelRequest) -> AssistantTurn:
    text, after = last_request(request.messages)
    span = re.search(r"`git diff (\S+)`", text)
    if after == 0 and span:
        return turn(call("diff", "shell", command=f"git diff --stat {span.group(1)}"))
    if "task #1 (round 1 of" in text.lower() and request.agent.endswith("spec-reviewer"):
        return AssistantTurn(text="request changes\n1. fix-1.txt must exist")
    return AssistantTurn(text="approve\nMeets the spec.")


def phase_reviewer(request: ModelRequest) -> AssistantTurn:
    text, after = last_request(request.messages)
    if after == 0:
        return turn(call("check", "shell", command="test -f CHANGELOG.md && echo yes || echo no"))
    has_changelog = request.messages[-1].text.startswith("yes")
    if has_changelog:
        return AssistantTurn(text="approve\nThe job fits together.")
    return AssistantTurn(text="request changes\n1. Add CHANGELOG.md listing alpha, beta, combine")


ROLES = {
    "office-manager": office_manager,
    "project-lead": project_lead,
    "coding-lead": coding_lead,
    "implementer": implementer,
    "spec-reviewer": reviewer,
    "quality-reviewer": reviewer,
    "phase-reviewer": phase_reviewer,
}


def model() -> FunctionModel:
    return FunctionModel(lambda request: ROLES[request.agent.rsplit("/", 1)[-1]](request))


async def open_office(home: Path, the_model: Model, project_text: str = PROJECT) -> Office:
    org = load_organisation(shipped_org_dir())
    project = load_project(project_text, org=org, source="project.yaml", default_name="widgets")
    sandbox = await probe(ENV, home=home)
    return await Office.open(
        home, org=org, projects=[project], models=lambda _: the_model, env=ENV, sandbox=sandbox
    )


def job_repo(home: Path, job_id: int = 1, slug: str = "alpha-and-beta") -> Path:
    """The repository that holds a job's branches."""
    return home / "repos" / "widgets" / "jobs" / f"job-{job_id}--{slug}" / "repo.git"


async def start(office: Office, repo: Path) -> JobHandle:
    head = git(repo, "rev-parse", "HEAD").strip()
    return await office.start_here(
        project="widgets",
        key="widgets#7",
        title="Alpha and beta",
        brief="Issue #7: Alpha and beta.",
        source=JobSource(
            repo="widgets",
            source=str(repo),
            start=head,
            branch=lambda job_id: "teaparty/job-7-alpha-and-beta",
            slug="alpha-and-beta",
        ),
    )


async def never(gate: object) -> str:
    raise AssertionError(f"no gate expected: {gate}")
