"""Routing derived from membership: who reaches whom, and the refusals."""

from __future__ import annotations

import pytest
from fakes import (
    CODING_LEAD,
    IMPLEMENTER,
    LEAD,
    OM,
    OTHER_LEAD,
    RESEARCH_LEAD,
    RESEARCHER,
    REVIEWER,
    org_router,
)

from orchestrator.bus.routing import Router, Team, organisation_teams
from orchestrator.config import load_organisation, load_project, shipped_org_dir
from orchestrator.core.errors import RoutingError
from orchestrator.core.gate_kinds import GateKinds

ALLOWED = [
    (IMPLEMENTER, "coding-lead", CODING_LEAD),  # member -> its lead
    (IMPLEMENTER, "spec-reviewer", REVIEWER),  # member -> teammate (workgroup mesh)
    (CODING_LEAD, "implementer", IMPLEMENTER),  # lead -> member
    (CODING_LEAD, "project-lead", LEAD),  # workgroup lead -> its own lead
    (LEAD, "coding", CODING_LEAD),  # project lead -> workgroup lead, by workgroup name
    (LEAD, "research-lead", RESEARCH_LEAD),
    (LEAD, "office-manager", OM),  # project lead -> its own lead
    (OM, "gadgets", OTHER_LEAD),  # cross-project only via the office manager
]

REFUSED = [
    (IMPLEMENTER, "researcher"),  # another workgroup
    (IMPLEMENTER, "project-lead"),  # skip a level
    (RESEARCHER, "implementer"),
    (CODING_LEAD, "research-lead"),  # workgroup leads are not meshed
    (LEAD, "implementer"),  # project lead reaches workgroup leads, not their members
    (OM, "coding-lead"),
    (CODING_LEAD, "nobody"),
]


@pytest.mark.parametrize(("sender", "member", "address"), ALLOWED)
def test_allowed_routes(sender: str, member: str, address: str) -> None:
    assert org_router().resolve(sender, member) == address


@pytest.mark.parametrize(("sender", "member"), REFUSED)
def test_refused_routes_say_whom_the_sender_can_reach(sender: str, member: str) -> None:
    router = org_router()
    with pytest.raises(RoutingError, match="route refused") as refused:
        router.resolve(sender, member)
    for name in router.reachable(sender):
        assert name in str(refused.value)


def test_cross_project_refused_for_project_leads() -> None:
    with pytest.raises(
        RoutingError, match="Work for anyone else goes through your lead, office-manager"
    ):
        org_router().resolve(LEAD, "gadgets")


def test_an_ambiguous_name_is_refused_with_the_candidates() -> None:
    router = Router([Team("lead", ("a/worker", "b/worker"))])
    with pytest.raises(RoutingError, match="ambiguous.*a/worker, b/worker"):
        router.resolve("lead", "worker")


def test_an_alias_must_name_a_member() -> None:
    with pytest.raises(ValueError, match="not a member"):
        Router([Team("lead", ("a",), aliases={"x": "b"})])


def test_routes_derive_from_the_shipped_configuration() -> None:
    org = load_organisation(shipped_org_dir())
    projects = [
        load_project(
            f"humans: {{decider: {who}}}\n",
            org=org,
            source=f"{name}.yaml",
            default_name=name,
            kinds=GateKinds(),  # routing reads no gate policy
        )
        for name, who in (("widgets", "alice"), ("gadgets", "bob"))
    ]
    router = Router(organisation_teams(org, projects))
    assert router.resolve("office-manager", "widgets") == "widgets/project-lead"
    assert router.resolve("office-manager", "proxy") == "proxy"
    assert router.resolve("widgets/project-lead", "coding") == "widgets/coding/coding-lead"
    assert router.resolve("widgets/project-lead", "office-manager") == "office-manager"
    assert router.resolve("widgets/coding/implementer", "spec-reviewer") == (
        "widgets/coding/spec-reviewer"
    )
    for sender, member in [
        ("widgets/coding/implementer", "researcher"),
        ("widgets/project-lead", "gadgets"),
        ("widgets/coding/coding-lead", "research-lead"),
    ]:
        with pytest.raises(RoutingError, match="route refused"):
            router.resolve(sender, member)
