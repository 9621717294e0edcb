"""The issue a job serves, and how to reach its repository: what the App links to a job."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Subject:
    """The issue a job serves, and how to reach its repository."""

    owner: str
    repo: str
    number: int
    installation_id: int
    default_branch: str
    title: str
    requester: str
    decider: str
    trigger_label: str
    # Read from links older versions wrote; a job now keeps its project text itself.
    project_yaml: str | None = None
    learnings: str | None = None

    def to_json(self) -> str:
        """As stored in job_links."""
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Subject:
        """From job_links."""
        return cls(**json.loads(text))
