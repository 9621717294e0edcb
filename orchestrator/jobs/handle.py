"""A started job as the office hands it out: its id, root conversation and workspace."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.workspace.spaces import JobSpace


@dataclass(frozen=True)
class JobHandle:
    """A started (or found) job and its workspace; `head`, once delivery checked it, the
    commit to push (else the job branch as it is)."""

    job_id: int
    conversation_id: str
    space: JobSpace
    created: bool
    head: str | None = None
