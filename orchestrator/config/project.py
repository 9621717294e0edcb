"""Load a repository's ``.teaparty/project.yaml`` against the organisation."""

from __future__ import annotations

from collections.abc import Mapping

from orchestrator.config.load import (
    Document,
    KeyPath,
    config_error,
    parse_yaml,
    unknown,
    validate,
)
from orchestrator.config.organisation import Resolver, members_only
from orchestrator.config.schema import (
    SEND_IS_FOR_LEADS,
    AgentDef,
    AgentDefaults,
    AgentFile,
    Humans,
    Organisation,
    Project,
    ProjectFile,
    ProjectRoster,
    Workgroup,
    WorkgroupFile,
    WorkgroupRef,
)
from orchestrator.core.errors import ConfigIssue
from orchestrator.core.gate_kinds import GateKinds


def load_project(
    text: str, *, org: Organisation, source: str, default_name: str, kinds: GateKinds
) -> Project:
    """Load and check a project file's text against ``org`` and the engine's gate ``kinds``;
    raise ConfigError on any issue."""
    doc = parse_yaml(text, source=source)
    raw, issues = validate(ProjectFile, doc.data, doc)
    if raw is not None:
        issues += _gate_issues(raw, doc, kinds)
    # Check the roster even when other keys are wrong, so one run reports both kinds of issue.
    roster = raw or validate(ProjectRoster, doc.data, doc)[0]
    resolved = None if roster is None else _resolve_roster(roster, doc, org=org, issues=issues)
    if issues or raw is None or resolved is None:
        raise config_error(issues)
    lead, workgroups = resolved
    return Project(
        name=raw.name or default_name,
        lead=lead,
        humans=raw.humans,
        workgroups=workgroups,
        trigger_label=raw.trigger_label,
        budget=raw.budget,
        gates={kind.name: raw.gates.get(kind.name, kind.default_mode) for kind in kinds},
        waiting=raw.waiting,
        parallel=raw.parallel,
        sandbox=raw.sandbox,
        proxy=raw.proxy,
        protected_paths=raw.protected_paths,
        rounds=raw.rounds,
        setup=raw.setup,
        instructions=raw.instructions,
        job_page=raw.job_page,
        pull_request=raw.pull_request,
        runner=raw.runner,
    )


def _gate_issues(raw: ProjectFile, doc: Document, kinds: GateKinds) -> list[ConfigIssue]:
    """Each gate kind `gates:` names must be one the engine knows, and each `proxy.allow`
    names one the proxy otherwise never answers alone."""
    issues = []
    for name in raw.gates:
        if name not in kinds:
            issues.append(doc.issue(("gates", name), unknown(name, kinds.names, "gate kind")))
    guarded = kinds.only_allowed()
    for index, name in enumerate(raw.proxy.allow):
        if name not in guarded:
            named = [repr(kind) for kind in guarded] or ["no kind"]
            allowed = " or ".join([", ".join(named[:-1]), named[-1]] if len(named) > 1 else named)
            issues.append(doc.issue(("proxy", "allow", index), f"must be {allowed}, got {name!r}"))
    return issues


def _resolve_roster(
    roster: ProjectRoster | ProjectFile,
    doc: Document,
    *,
    org: Organisation,
    issues: list[ConfigIssue],
) -> tuple[AgentDef, tuple[Workgroup, ...]] | None:
    resolver = Resolver({}, issues)
    inline = _inline_agents(roster.agents, doc, defaults=org.defaults, resolver=resolver)
    resolver.agents = {**org.agents, **inline}
    lead_name = roster.lead or org.project_lead
    lead = resolver.agent(lead_name, doc, ("lead",))
    placed = _project_workgroups(roster.workgroups, doc, org=org, resolver=resolver)
    for name in sorted(members_only((group for _, group in placed), [lead_name])):
        if "send" in resolver.agents[name].tools:
            where = next(at for at, group in placed if name in {m.name for m in group.members})
            issues.append(doc.issue(where, f"member {name!r} has send: {SEND_IS_FOR_LEADS}"))
    return None if lead is None else (lead, tuple(group for _, group in placed))


def _inline_agents(
    entries: tuple[dict[str, object], ...],
    doc: Document,
    *,
    defaults: AgentDefaults,
    resolver: Resolver,
) -> dict[str, AgentDef]:
    inline: dict[str, AgentDef] = {}
    for index, entry in enumerate(entries):
        agent, problems = validate(AgentFile, entry, doc, at=("agents", index))
        resolver.issues.extend(problems)
        if agent is None:
            if isinstance(name := entry.get("name"), str):
                resolver.broken.add(name)
            continue
        if agent.name in inline:
            message = f"{agent.name!r} is defined twice"
            resolver.issues.append(doc.issue(("agents", index, "name"), message))
        inline[agent.name] = agent.resolve(defaults)
    return inline


def _project_workgroups(
    entries: tuple[dict[str, object], ...] | None,
    doc: Document,
    *,
    org: Organisation,
    resolver: Resolver,
) -> list[tuple[KeyPath, Workgroup]]:
    """The project's workgroups, each with where the project names it; default: the catalog."""
    if entries is None:
        catalog = org.workgroups.values()
        return [(("workgroups",), _rebind(group, resolver.agents)) for group in catalog]
    placed: list[tuple[KeyPath, Workgroup]] = []
    for index, entry in enumerate(entries):
        at: KeyPath = ("workgroups", index)
        group = _project_workgroup(entry, doc, at, org=org, resolver=resolver)
        if group is not None and group.name in {known.name for _, known in placed}:
            resolver.issues.append(doc.issue(at, f"workgroup {group.name!r} appears twice"))
        elif group is not None:
            placed.append((at, group))
    return placed


def _project_workgroup(
    entry: Mapping[str, object],
    doc: Document,
    at: KeyPath,
    *,
    org: Organisation,
    resolver: Resolver,
) -> Workgroup | None:
    if "ref" not in entry:
        inline, problems = validate(WorkgroupFile, entry, doc, at=at)
        resolver.issues.extend(problems)
        return None if inline is None else resolver.workgroup(inline, doc, at)
    ref, problems = validate(WorkgroupRef, entry, doc, at=at)
    resolver.issues.extend(problems)
    if ref is None:
        return None
    if (base := org.workgroups.get(ref.ref)) is None:
        known = ", ".join(org.workgroups)
        message = f"no workgroup {ref.ref!r} in the organisation's catalog; known: {known}"
        resolver.issues.append(doc.issue((*at, "ref"), message))
        return None
    return _rebind(base, resolver.agents, humans=ref.humans or base.humans)


def _rebind(
    group: Workgroup, agents: Mapping[str, AgentDef], *, humans: Humans | None = None
) -> Workgroup:
    """A catalog workgroup with the project's own agent definitions swapped in."""
    return group.model_copy(
        update={
            "lead": agents.get(group.lead.name, group.lead),
            "members": tuple(agents.get(member.name, member) for member in group.members),
            "humans": humans or group.humans,
        }
    )
