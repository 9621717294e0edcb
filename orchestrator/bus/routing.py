"""Who may Send to whom, derived from team membership.

A team is a lead and its members. A lead reaches its members; a member reaches its lead
and, in a meshed team (a workgroup), the other members. Leads are members of the team
above, so they reach their own lead; cross-project traffic therefore passes through the
office manager, whose team is the project leads. Agents are named by address
(`project/workgroup/agent`); they Send by short name or by an alias (a project or
workgroup name for its lead).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from orchestrator.config import Organisation, Project, Workgroup
from orchestrator.core.errors import RoutingError


def short_name(address: str) -> str:
    """The roster name of an address: its last component."""
    return address.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Team:
    """A lead, its members, and whether the members reach each other."""

    lead: str
    members: tuple[str, ...]
    mesh: bool = False
    aliases: Mapping[str, str] = field(default_factory=dict)
    answerable: bool = True  # members reach the lead (False: the engine's mini-team)


class Router:
    """Resolves a sender's Send target to an address, or refuses with a reason it can act on."""

    def __init__(self, teams: Iterable[Team]) -> None:
        self._routes: dict[str, dict[str, set[str]]] = {}
        self._lead_of: dict[str, str] = {}
        for team in teams:
            self._add(team)

    def extend(self, teams: Iterable[Team]) -> None:
        """Add teams (a project joining a running engine); existing routes stay."""
        for team in teams:
            self._add(team)

    def _add(self, team: Team) -> None:
        lead_routes = self._routes.setdefault(team.lead, {})
        for member in team.members:
            self._name(lead_routes, short_name(member), member)
            if not team.answerable:
                continue
            self._lead_of[member] = team.lead
            member_routes = self._routes.setdefault(member, {})
            self._name(member_routes, short_name(team.lead), team.lead)
            if team.mesh:
                for other in team.members:
                    if other != member:
                        self._name(member_routes, short_name(other), other)
        for alias, member in team.aliases.items():
            if member not in team.members:
                raise ValueError(f"alias {alias!r} names {member!r}, not a member of the team")
            self._name(lead_routes, alias, member)

    @staticmethod
    def _name(routes: dict[str, set[str]], name: str, address: str) -> None:
        routes.setdefault(name, set()).add(address)

    def reachable(self, sender: str) -> dict[str, str]:
        """The names `sender` can Send to, each with the one address it means."""
        return {
            name: next(iter(addresses))
            for name, addresses in self._routes.get(sender, {}).items()
            if len(addresses) == 1
        }

    def resolve(self, sender: str, member: str) -> str:
        """The address `member` means for `sender`, or a RoutingError saying what to do."""
        addresses = self._routes.get(sender, {}).get(member, set())
        if len(addresses) == 1:
            return next(iter(addresses))
        if len(addresses) > 1:
            raise RoutingError(
                f"route refused: {member!r} is ambiguous for {sender}; it names "
                f"{', '.join(sorted(addresses))}"
            )
        names = ", ".join(sorted(self.reachable(sender))) or "nobody"
        hint = ""
        if (lead := self._lead_of.get(sender)) is not None:
            hint = f" Work for anyone else goes through your lead, {short_name(lead)}."
        raise RoutingError(
            f"route refused: {short_name(sender)} cannot send to {member!r}. "
            f"You can reach: {names}.{hint}"
        )


WorkgroupTeams = Callable[[str, Workgroup, tuple[str, ...]], Iterable["Team"]]
"""Teams a feature adds to each workgroup: (its project, the workgroup, its members'
addresses) -> teams (the mini-teams' coordinator, which reaches the members)."""


def no_teams(project: str, workgroup: Workgroup, members: tuple[str, ...]) -> Iterable[Team]:
    """No teams beyond the configuration's."""
    return ()


def organisation_teams(
    org: Organisation, projects: Sequence[Project], *, added: WorkgroupTeams = no_teams
) -> list[Team]:
    """The teams a configuration defines, with agents named by address.

    The office manager leads the project leads and the proxy; a project lead leads its
    workgroups' leads (reachable by workgroup name too); a workgroup lead leads its
    members, who reach each other. `added` gives each workgroup the teams features add
    (the mini-team coordinator, who reaches the members, who answer it by replies only).
    """
    om = org.office_manager.name
    leads = {project.name: f"{project.name}/{project.lead.name}" for project in projects}
    teams = [Team(om, (*leads.values(), org.proxy.name), aliases=leads)]
    for project in projects:
        teams.extend(_project_teams(project, leads[project.name], added))
    return teams


def project_teams(
    org: Organisation, project: Project, *, added: WorkgroupTeams = no_teams
) -> list[Team]:
    """The teams one more project adds to a running organisation (its lead joins the OM's)."""
    lead = f"{project.name}/{project.lead.name}"
    om_team = Team(org.office_manager.name, (lead,), aliases={project.name: lead})
    return [om_team, *_project_teams(project, lead, added)]


def _project_teams(project: Project, lead: str, added: WorkgroupTeams) -> list[Team]:
    wg_leads = {wg.name: f"{project.name}/{wg.name}/{wg.lead.name}" for wg in project.workgroups}
    teams = [Team(lead, tuple(wg_leads.values()), aliases=wg_leads)]
    for wg in project.workgroups:
        members = tuple(f"{project.name}/{wg.name}/{m.name}" for m in wg.members)
        teams.append(Team(wg_leads[wg.name], members, mesh=True))
        teams.extend(added(project.name, wg, members))
    return teams
