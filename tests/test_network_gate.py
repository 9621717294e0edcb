"""What the sandbox refuses an agent is reported, and widening the network is a gate.

An office over a real sandbox (bubblewrap, then Landlock) and a job on a local repository;
agents' shell calls are made through the office's own tools, as the engine makes them.
With the network off and with an allowlist, a refused request shows on the tracking
comment and in `teaparty jobs show` with its host, command and caller. With `sandbox.ask:
true` the first refusal of a host asks the decider (`network <hash>`, never answered by the
proxy alone); an approval lets the same command through on its next try, in this job only,
and a name that resolves to loopback stays refused after approval. Names resolve through the
test's resolver and the one public address is a local server: nothing leaves this machine.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import cmarkgfm
import demo_office
import pytest
from conftest import confined
from local_repo import make_repo
from netproxy_support import Hello, egress_to

from bot.github.outbound import Outbound
from bot.github.tracking import gate_body, tracking_body
from bot.jobs_json import view as json_view
from bot.jobs_text import view as text_view
from orchestrator.config import (
    ConfigError,
    Organisation,
    load_organisation,
    load_project,
    shipped_org_dir,
)
from orchestrator.core.messages import ToolCall
from orchestrator.jobs.driver import JobDriver
from orchestrator.jobs.features import GATE_KINDS
from orchestrator.jobs.network_gate import KIND, MAX_OPEN, askable
from orchestrator.jobs.office import Office
from orchestrator.jobs.offline import DemoModel
from orchestrator.jobs.ports import Forge
from orchestrator.jobs.views import JobViews
from orchestrator.sandbox.confine import Sandbox
from orchestrator.sandbox.netproxy import Refusal, RefusalWhy

AGENT = Outbound("o", "r", 5, "https://github.com")
CURL = "curl -sS --max-time 20 -o /dev/null -w 'status %{http_code}\\n' "
FETCH = (
    'python3 -c "import urllib.request, sys\n'
    "try:\n print(urllib.request.urlopen(sys.argv[1], timeout=20).read().decode())\n"
    "except Exception as exc:\n print('failed:', exc)\" "
)
ORG = shipped_org_dir()


@pytest.fixture(params=["bwrap", "landlock"])
def setting(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Sandbox, Path]]:
    """A sandbox and a state directory the agents' users can reach (/tmp, 0711)."""
    for found, work in confined(request.param, f"net-gate-{tmp_path.name}"):
        yield found, work.parent


class Job:
    """An office with one job started, whose root conversation makes shell calls."""

    def __init__(self, office: Office, job_id: int) -> None:
        self.office = office
        self.job_id = job_id
        self.calls = 0

    async def shell(self, command: str) -> str:
        self.calls += 1
        call = ToolCall(f"c{self.calls}", "shell", {"command": command})
        tools = self.office.engine.scheduler.runner.tools
        result = await tools.run("office-manager", f"job:{self.job_id}", call)
        return result.output

    async def tracking(self) -> str:
        async def no_forge(_: int) -> Forge | None:
            return None

        status = await JobDriver(self.office, no_forge).status(self.job_id)
        return tracking_body(status, branch_url=None, trigger_label="teaparty", agent=AGENT)


async def open_job(home: Path, tmp_path: Path, sandbox: Sandbox, project_text: str) -> Job:
    org = load_organisation(ORG)
    project = load_project(
        project_text, org=org, source="p.yaml", default_name="widgets", kinds=GATE_KINDS
    )
    office = await Office.open(
        home,
        org=org,
        projects=[project],
        models=lambda _: DemoModel(),
        env={"PATH": "/usr/bin:/bin"},
        sandbox=sandbox,
    )
    repo = make_repo(tmp_path / "repo")
    started = await office.start_job(
        project="widgets",
        key="local:widgets#1",
        title="Fetch things",
        brief="Job: Fetch things\n\n<issue>Fetch things.</issue>",
        source=demo_office.local_source(repo, "fetch"),
        project_text=project_text,
    )
    await office.prepare(started.job_id)  # its workspace; no turn runs: nobody schedules them
    return Job(office, started.job_id)


async def hello_job(
    setting: tuple[Sandbox, Path], tmp_path: Path, hello: Hello, network: str
) -> Job:
    """A job (decider dev) whose sandbox's egress goes to `hello`, under the project's
    `sandbox: {network}`."""
    found, home = setting
    sandbox = replace(found, egress=egress_to(hello))
    return await open_job(
        home, tmp_path, sandbox, f"humans: {{decider: dev}}\nsandbox: {network}\n"
    )


async def test_a_refusal_is_reported_with_its_host_command_and_caller(
    setting: tuple[Sandbox, Path], tmp_path: Path, hello: Hello
) -> None:
    home = setting[1]
    job = await hello_job(setting, tmp_path, hello, "{network: [pypi.test]}")
    try:
        assert (await job.shell(FETCH + "http://pypi.test/")).startswith("hello")
        told = await job.shell(CURL + "https://example.org/x")
        assert "[sandbox: refused egress to example.org:443 (not allowed)]" in told
        await job.shell(CURL + "https://example.org/x")
        body = await job.tracking()
        assert "**Network refused:**" in body
        assert "`example.org:443` (not allowed) ×2 · the job (office-manager): " in body
        assert "`curl -sS --max-time 20" in body
        assert not await job.office.open_gates(job.job_id), "sandbox.ask is off: nobody asked"
    finally:
        await job.office.close()

    async with JobViews.open(home, org_dir=ORG) as views:
        shown = await views.job(job.job_id)
    text = "\n".join(text_view(shown, now=shown.summary.updated_at))
    assert "network refused\n  example.org:443 (not allowed) x2" in text
    assert "the job (office-manager): curl -sS" in text
    [row] = json_view(shown, now=0.0)["network_refused"]
    assert (row["host"], row["port"], row["count"], row["task"]) == ("example.org", 443, 2, None)


async def test_an_approved_host_gets_through_and_loopback_stays_refused(
    setting: tuple[Sandbox, Path], tmp_path: Path, hello: Hello
) -> None:
    job = await hello_job(setting, tmp_path, hello, "{network: 'off', ask: true}")
    office = job.office
    try:
        told = await job.shell(FETCH + "http://crates.test/index")
        assert "failed: HTTP Error 403" in told
        assert "the decider was asked whether this job may reach crates.test" in told
        [gate] = await office.open_gates(job.job_id)
        assert (gate.kind, gate.payload["host"]) == (KIND.name, "crates.test")
        assert gate.question.startswith("Allow `crates.test` for this job?")
        assert "urllib.request.urlopen" in gate.question, "the command, as the agent ran it"
        asked = gate_body(gate, decider="dev", agent=AGENT)
        assert f"`/approve {gate.short_hash}`" in asked
        assert "**Network refused:**" in await job.tracking()
        await job.shell(FETCH + "http://crates.test/again")  # asked once per host
        assert len(await office.open_gates(job.job_id)) == 1

        await office.answer_gate(gate.gate_id, text="approve", answered_by="dev")
        assert (await job.shell(FETCH + "http://crates.test/index")).startswith("hello")

        # a name that resolves to loopback: asked about (its address is the proxy's to
        # check), approved, and still refused
        await job.shell(FETCH + "http://loop.test/")
        [loop] = await office.open_gates(job.job_id)
        await office.answer_gate(loop.gate_id, text="yes", answered_by="dev")
        again = await job.shell(FETCH + "http://loop.test/")
        assert "failed: HTTP Error 403" in again
        assert "loop.test:80 (resolves to a non-public address)" in again
        # localhost, through the proxy or not, is never asked about
        await job.shell("curl -sS --max-time 5 --noproxy '' http://localhost/ ; curl -sS "
                        "--max-time 5 http://127.0.0.1:9/")  # fmt: skip
        assert not await office.open_gates(job.job_id)
        body = await job.tracking()
        assert "`localhost:80` (not allowed)" in body
        assert "`loop.test:80` (resolves to a non-public address)" in body
    finally:
        await office.close()


def test_only_names_that_could_be_public_are_asked_about() -> None:
    assert askable("Index.Crates.IO.") == "index.crates.io"
    assert askable("93.184.215.14") == "93.184.215.14"
    for host in ("localhost", "a.localhost", "printer.local", "intranet", "127.0.0.1",
                 "169.254.169.254", "10.0.0.1", "[::1]", "fe80::1", "bad host", "x" * 300,
                 "metadata.google.internal", "127.1"):  # fmt: skip
        assert askable(host) is None, host
    assert KIND.proxy_never, "the proxy never answers it alone, whatever a project says"


HOSTILE = "curl `x` @octocat Closes #1 <!-- hidden --> https://crates.test\n\x1b[31mred"


async def desk_job(home: Path, tmp_path: Path, project_text: str) -> Job:
    """An office with a job and no sandbox: the desk is given refusals as a call reports them."""
    office = await demo_office.open_office(home, project_text, DemoModel())
    job_id = await demo_office.start_job(
        office, make_repo(tmp_path / "repo"), project_text, title="t", body="b"
    )
    return Job(office, job_id)


def refused(*hosts: str, why: RefusalWhy = "host") -> Counter[Refusal]:
    return Counter({Refusal(host, 443, why): 1 for host in hosts})


async def test_a_denied_host_stays_refused_and_is_not_asked_again(tmp_path: Path) -> None:
    text = "humans: {decider: dev}\nsandbox: {ask: true}\n"
    job = await desk_job(tmp_path / "home", tmp_path, text)
    desk, root = job.office.egress, f"job:{job.job_id}"
    try:
        await desk.refused(root, agent="a", command="cargo build", refusals=refused("crates.test"))
        [gate] = await job.office.open_gates(job.job_id)
        await job.office.answer_gate(gate.gate_id, text="no, vendor it", answered_by="dev")
        assert await desk.granted(root) == ()
        note = await desk.refused(root, agent="a", command="x", refusals=refused("crates.test"))
        assert note == "[sandbox: refused egress to crates.test:443 (not allowed)]"
        assert not await job.office.open_gates(job.job_id)
        # no question for what no approval could open, nor past MAX_OPEN at once
        never = ("localhost", "10.1.2.3", "metadata.internal")
        await desk.refused(root, agent="a", command="x", refusals=refused(*never))
        await desk.refused(root, agent="a", command="x", refusals=refused("b.test", why="port"))
        assert not await job.office.open_gates(job.job_id)
        many = [f"h{n}.test" for n in range(MAX_OPEN + 2)]
        await desk.refused(root, agent="a", command="x", refusals=refused(*many))
        assert len(await job.office.open_gates(job.job_id)) == MAX_OPEN
    finally:
        await job.office.close()


async def test_an_approval_survives_a_restart_and_stays_in_its_job(tmp_path: Path) -> None:
    text = "humans: {decider: dev}\nsandbox: {ask: true}\n"
    home = tmp_path / "home"
    job = await desk_job(home, tmp_path, text)
    root = f"job:{job.job_id}"
    try:
        await job.office.egress.refused(
            root, agent="project-lead", command=HOSTILE, refusals=refused("crates.test")
        )
        [gate] = await job.office.open_gates(job.job_id)
        await job.office.answer_gate(gate.gate_id, text="approve", answered_by="dev")
        other = await demo_office.start_job(
            job.office, make_repo(tmp_path / "other"), text, title="u", body="c", number=2
        )
    finally:
        await job.office.close()
    office = await demo_office.open_office(home, text, DemoModel())
    try:
        assert await office.egress.granted(root) == ("crates.test",)
        assert await office.egress.granted(f"job:{other}") == ()
        [row] = await office.egress.of_job(job.job_id)
        assert row.caller == "the job (project-lead)"
        assert "\n" not in row.command, "kept on one line"
        body = await Job(office, job.job_id).tracking()
        [line] = [line for line in body.splitlines() if "crates.test:443" in line]
        shown = cmarkgfm.github_flavored_markdown_to_html(line)
        outside = re.sub(r"<code>.*?</code>", "", shown, flags=re.DOTALL)
        assert "@octocat" not in outside, "no live mention"
        assert "Closes" not in outside, "no closing keyword"
        assert "<!--" not in shown, "nothing hidden"
        assert "\x1b" not in body
    finally:
        await office.close()


def test_the_proxy_may_never_be_allowed_to_answer_it(org: Organisation) -> None:
    text = "humans: {decider: dev}\nproxy: {allow: [network]}\n"
    with pytest.raises(ConfigError, match="proxy.allow"):
        load_project(text, org=org, source="p.yaml", default_name="w", kinds=GATE_KINDS)
