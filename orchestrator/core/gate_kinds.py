"""Kinds of gate: what a feature declares when it puts questions to people.

A gate kind is a record (its name, the mode a project gets without saying, how people and
the proxy read it, whether the proxy may answer it alone); the feature that asks it registers
it, and whatever lists or checks kinds (a project's `gates:` and `proxy.allow`, the proxy's
policy, the tracking comment, the edge's commands) reads them from the registry the
composition root made. What an answer does is the bus's extension point
(orchestrator/bus/extensions.py), not part of the record: config reads kinds too, and sits
below the bus.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

GateMode = Literal["always", "when_unsure", "never"]
GATE_MODES: tuple[GateMode, ...] = ("always", "when_unsure", "never")


@dataclass(frozen=True)
class GateKind:
    """One kind of gate, as the feature that asks it declares it.

    `title` names what is asked in a heading ("the plan"); `about` tells the proxy what
    answering decides. `proxy_alone`: whether the proxy may answer it alone once it has
    earned that (else only where a project's `proxy.allow` lists the kind). `proxy_never`:
    the proxy never answers it alone, whatever a project says (`proxy.allow` may not list
    it); it may still suggest an answer. `engine_asks`:
    the engine asks it by its own rules (every kind but an agent's question); a job that
    recorded no gate policy has none of those. `wakes_asker`: an agent waits on its answer
    (advice to a gate nobody waits on wakes nobody).
    """

    name: str
    default_mode: GateMode
    title: str
    about: str
    proxy_alone: bool = True
    proxy_never: bool = False
    engine_asks: bool = True
    wakes_asker: bool = True


class GateKinds:
    """The gate kinds an engine knows, by name, in the order they were added."""

    def __init__(self, kinds: Iterable[GateKind] = ()) -> None:
        self._kinds: dict[str, GateKind] = {}
        for kind in kinds:
            self.add(kind)

    def add(self, kind: GateKind) -> GateKind:
        """Know `kind`; ValueError when another kind has its name."""
        if kind.name in self._kinds and self._kinds[kind.name] != kind:
            raise ValueError(f"two gate kinds are named {kind.name!r}")
        self._kinds[kind.name] = kind
        return kind

    def __getitem__(self, name: str) -> GateKind:
        return self._kinds[name]

    def get(self, name: str) -> GateKind | None:
        """The kind named `name`, if known."""
        return self._kinds.get(name)

    def __iter__(self) -> Iterator[GateKind]:
        return iter(self._kinds.values())

    def __contains__(self, name: object) -> bool:
        return name in self._kinds

    @property
    def names(self) -> tuple[str, ...]:
        """Every kind's name."""
        return tuple(self._kinds)

    def defaults(self) -> Mapping[str, GateMode]:
        """Each kind with the mode a project gets without saying."""
        return {kind.name: kind.default_mode for kind in self}

    def only_allowed(self) -> tuple[str, ...]:
        """Kinds the proxy answers alone only where a project allows it (`proxy.allow`)."""
        return tuple(kind.name for kind in self if not kind.proxy_alone and not kind.proxy_never)
