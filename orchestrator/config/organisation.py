"""Load the organisation directory into checked models; the agent resolver projects share."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from orchestrator.config.load import Document, KeyPath, config_error, read_yaml, validate
from orchestrator.config.prices import PRICES_FILE, org_prices
from orchestrator.config.schema import (
    ORG_FILE,
    SEND_IS_FOR_LEADS,
    AgentDef,
    AgentDefaults,
    AgentFile,
    Organisation,
    OrgFile,
    Workgroup,
    WorkgroupFile,
)
from orchestrator.core.errors import ConfigError, ConfigIssue

ModelT = TypeVar("ModelT", bound=BaseModel)


@dataclass
class Resolver:
    """Looks agents up by name and records an issue for each name it cannot resolve."""

    agents: Mapping[str, AgentDef]
    issues: list[ConfigIssue] = field(default_factory=list)
    broken: set[str] = field(default_factory=set)  # defined, but with issues already reported

    def agent(self, name: str, doc: Document, at: KeyPath) -> AgentDef | None:
        """The agent called ``name``, or None after recording where it was named."""
        if (found := self.agents.get(name)) is None and name not in self.broken:
            known = ", ".join(sorted(self.agents)) or "(none)"
            self.issues.append(doc.issue(at, f"no agent named {name!r}; known agents: {known}"))
        return found

    def workgroup(self, raw: WorkgroupFile, doc: Document, at: KeyPath) -> Workgroup | None:
        """Resolve a workgroup's lead and members, or None after recording why not."""
        self.issues.extend(roster_issues(raw, doc, at))
        lead = self.agent(raw.lead, doc, (*at, "lead"))
        members = [self.agent(name, doc, (*at, "members", i)) for i, name in enumerate(raw.members)]
        found = tuple(member for member in members if member is not None)
        self.issues.extend(_role_issues(raw, doc, at))
        if lead is None or len(found) != len(members):
            return None
        return Workgroup(
            name=raw.name,
            description=raw.description,
            lead=lead,
            members=found,
            humans=raw.humans,
            review_rounds=raw.review_rounds,
            worker=raw.worker,
            spec_reviewer=raw.spec_reviewer,
            quality_reviewer=raw.quality_reviewer,
            phase_reviewer=raw.phase_reviewer,
        )


ROLES = ("worker", "spec_reviewer", "quality_reviewer", "phase_reviewer")


def _role_issues(raw: WorkgroupFile, doc: Document, at: KeyPath) -> Iterable[ConfigIssue]:
    """An issue for each mini-team role that names someone who is not a member."""
    for role in ROLES:
        name = getattr(raw, role)
        if name is not None and name not in raw.members:
            members = ", ".join(raw.members)
            yield doc.issue((*at, role), f"{name!r} is not a member; members: {members}")


def roster_issues(raw: WorkgroupFile, doc: Document, at: KeyPath) -> Iterable[ConfigIssue]:
    """An issue for each agent named twice on one team."""
    seen = {raw.lead: "lead"}
    for index, name in enumerate(raw.members):
        if name in seen:
            message = f"{name!r} is already on this team as {seen[name]}"
            yield doc.issue((*at, "members", index), message)
        seen.setdefault(name, "a member")


def _read_model(
    path: Path, model: type[ModelT], issues: list[ConfigIssue]
) -> tuple[Document, ModelT] | None:
    try:
        doc = read_yaml(path)
    except ConfigError as exc:
        issues.extend(exc.issues)
        return None
    raw, problems = validate(model, doc.data, doc)
    issues.extend(problems)
    return None if raw is None else (doc, raw)


def read_agent(
    path: Path, defaults: AgentDefaults, *, issues: list[ConfigIssue]
) -> tuple[Document, AgentDef] | None:
    """Read one ``agents/<name>.yaml``, or None after recording its issues."""
    if (read := _read_model(path, AgentFile, issues)) is None:
        return None
    doc, raw = read
    if raw.name != path.stem:
        message = f"{raw.name!r} differs from the file name {path.name!r}"
        issues.append(doc.issue(("name",), message))
        return None
    return doc, raw.resolve(defaults)


def read_workgroup(path: Path, issues: list[ConfigIssue]) -> tuple[Document, WorkgroupFile] | None:
    """Read one ``workgroups/<name>.yaml`` on its own, or None after recording its issues."""
    if (read := _read_model(path, WorkgroupFile, issues)) is not None:
        issues.extend(roster_issues(read[1], read[0], ()))
    return read


def _load_agents(
    folder: Path, defaults: AgentDefaults, resolver: Resolver
) -> dict[str, tuple[Document, AgentDef]]:
    agents: dict[str, tuple[Document, AgentDef]] = {}
    for path in sorted(folder.glob("*.yaml")):
        if (read := read_agent(path, defaults, issues=resolver.issues)) is None:
            resolver.broken.add(path.stem)
        else:
            agents[read[1].name] = read
    return agents


def _price_issues(
    directory: Path, agents: dict[str, tuple[Document, AgentDef]]
) -> list[ConfigIssue]:
    """The organisation's models.yaml (if it has one) must load and price every agent's model."""

    try:
        prices = org_prices(directory)
    except ConfigError as exc:
        return list(exc.issues)
    where = directory / PRICES_FILE if (directory / PRICES_FILE).is_file() else "the shipped prices"
    issues = []
    for doc, agent in agents.values():
        try:
            prices.price(agent.model)
        except ConfigError:
            message = f"no price for model {agent.model!r} in {where}; add it there"
            issues.append(doc.issue(("model",), message))
    return issues


def _load_catalog(
    directory: Path, raw: OrgFile, *, org_doc: Document, resolver: Resolver
) -> dict[str, Workgroup]:
    catalog: dict[str, Workgroup] = {}
    for key, relative in raw.workgroups.items():
        path = directory / relative
        if not path.is_file():
            message = f"no workgroup file {relative!r} in {directory}"
            resolver.issues.append(org_doc.issue(("workgroups", key), message))
            continue
        if (read := _read_model(path, WorkgroupFile, resolver.issues)) is None:
            continue
        doc, wg_raw = read
        if wg_raw.name != key:
            message = f"{wg_raw.name!r} differs from its catalog key {key!r} in {org_doc.source}"
            resolver.issues.append(doc.issue(("name",), message))
        elif (workgroup := resolver.workgroup(wg_raw, doc, ())) is not None:
            catalog[key] = workgroup
    return catalog


def members_only(workgroups: Iterable[Workgroup], leads: Iterable[str]) -> set[str]:
    """Agents that sit on some team here but lead none, so may not use send."""
    groups = list(workgroups)
    lead_names = {*leads, *(group.lead.name for group in groups)}
    return {member.name for group in groups for member in group.members} - lead_names


def _send_issues(
    names: Iterable[str], loaded: Mapping[str, tuple[Document, AgentDef]]
) -> Iterable[ConfigIssue]:
    for name in sorted(names):
        doc, agent = loaded[name]
        if "send" in agent.tools:
            message = f"{name!r} leads no team: {SEND_IS_FOR_LEADS}"
            yield doc.issue(("tools", agent.tools.index("send")), message)


def load_organisation(directory: Path) -> Organisation:
    """Load and check the organisation in ``directory``; raise ConfigError listing every issue."""
    resolver = Resolver({})
    read = _read_model(directory / ORG_FILE, OrgFile, resolver.issues)
    defaults = read[1].defaults if read else AgentDefaults()
    loaded = _load_agents(directory / "agents", defaults, resolver)
    if read is None:
        raise config_error(resolver.issues)
    org_doc, raw = read
    resolver.agents = {name: agent for name, (_, agent) in loaded.items()}
    catalog = _load_catalog(directory, raw, org_doc=org_doc, resolver=resolver)
    office_manager = resolver.agent(raw.office_manager, org_doc, ("office_manager",))
    proxy = resolver.agent(raw.proxy, org_doc, ("proxy",))
    resolver.agent(raw.project_lead, org_doc, ("project_lead",))
    leads = [raw.office_manager, raw.project_lead]
    resolver.issues.extend(_send_issues(members_only(catalog.values(), leads), loaded))
    resolver.issues.extend(_price_issues(directory, loaded))
    if resolver.issues or office_manager is None or proxy is None:
        raise config_error(resolver.issues)
    return Organisation(
        name=raw.name,
        office_manager=office_manager,
        proxy=proxy,
        project_lead=raw.project_lead,
        humans=raw.humans,
        defaults=raw.defaults,
        workgroups=catalog,
        agents=resolver.agents,
        directory=directory,
    )
