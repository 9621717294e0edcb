"""Exceptions raised by the orchestrator, all rooted at OrchestratorError.

OrchestratorError
 ├── ConfigError      an organisation or project configuration is invalid (carries its issues)
 ├── StoreError       the store cannot be opened or migrated
 │    ├── StoreLockedError   another engine holds the store
 │    └── StoreVersionError  the store's schema is not this teaparty's (read beside another)
 ├── JobNotFoundError no job has the id asked for
 ├── JobStateError    the job is not in a state the operation needs (ended, not local, ...)
 ├── BusError         a conversation operation broke an invariant (no such conversation, closed)
 ├── NotProxyAnsweredError   an override named a gate the proxy did not answer alone
 ├── RoutingError     a Send names nobody the sender may reach (goes back to the agent)
 ├── ToolError        a tool call the model can correct (goes back to the model as an error)
 ├── ForgeError       the forge (GitHub, a local remote) failed an action of a job
 │    └── ForgeWaitError     the forge asks the job to wait (a rate limit) until a time
 ├── SandboxError     agents' processes cannot be confined here (and the operator did not
 │                    say TEAPARTY_SANDBOX=off), or a sandbox setting is invalid
 ├── LimitError       an agent's work went past a limit the operator set (its disk): the
 │                    agent's turn ends, and its task with it
 └── ModelError       a model call failed (also: real requests are disabled in tests)
      ├── ModelUnavailableError   overloaded, rate-limited or unreachable through every retry
      ├── ModelAuthError          the API key is missing, rejected or lacks permission
      └── ModelRequestError       the API refused the request (bad request, unknown model)
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConfigIssue:
    """One problem in a configuration file, located by file, line and dotted key."""

    file: str
    line: int | None
    key: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.key}: {self.message}" if self.key else f"{where}: {self.message}"


class OrchestratorError(Exception):
    """Root of every error the orchestrator raises on purpose."""


class ConfigError(OrchestratorError):
    """The configuration has one or more issues; str() lists them one per line."""

    def __init__(self, issues: tuple[ConfigIssue, ...]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(issue) for issue in issues))


class StoreError(OrchestratorError):
    """The store cannot be opened, migrated or used."""


class StoreLockedError(StoreError):
    """Another engine process holds this store."""


class StoreVersionError(StoreError):
    """The store's schema version is not this teaparty's, and it cannot be migrated here."""

    def __init__(self, message: str, *, found: int, expected: int) -> None:
        self.found = found
        self.expected = expected
        super().__init__(message)


class JobNotFoundError(OrchestratorError):
    """No job in the store has the id asked for."""

    def __init__(self, job_id: int) -> None:
        self.job_id = job_id
        super().__init__(f"no job {job_id} in this state directory")


class JobStateError(OrchestratorError):
    """The job is not in a state the operation needs; the message says which and why."""


class BusError(OrchestratorError):
    """A conversation operation broke an invariant."""


class GateClosedError(BusError):
    """A gate was answered already, or the answer's source (a comment) answered one before."""


class NotProxyAnsweredError(OrchestratorError):
    """An override named a gate the proxy did not answer alone; `gate_id` is the gate."""

    def __init__(self, gate_id: int, reason: str) -> None:
        super().__init__(f"gate {gate_id}: {reason}")
        self.gate_id = gate_id


class SandboxError(OrchestratorError):
    """Agents' processes cannot run confined here; the message names the cause."""


class LimitError(OrchestratorError):
    """An agent's work went past an operator's limit; the message names it, `output` is what
    the call printed before it was stopped."""

    def __init__(self, message: str, *, output: str = "") -> None:
        self.output = output
        super().__init__(message)


class RoutingError(OrchestratorError):
    """A Send named nobody the sender may reach; the message says whom it can."""


class ToolError(OrchestratorError):
    """A tool call failed in a way the model can correct; it reads the message."""


class ModelError(OrchestratorError):
    """A model call failed; the message says why and never contains a secret."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        self.status = status
        super().__init__(message)


class TurnDeferred(ModelError):
    """A model that makes more than one call for a turn did not start the next: the run's
    deadline had passed. Nothing of the turn is recorded; the next run makes it again."""


class ModelUnavailableError(ModelError):
    """The model API stayed overloaded, rate-limited or unreachable through every retry.

    `retry_after` is the server's hint in seconds, when it gave one.
    """

    def __init__(
        self, message: str, *, status: int | None = None, retry_after: float | None = None
    ) -> None:
        self.retry_after = retry_after
        super().__init__(message, status=status)


class ModelAuthError(ModelError):
    """The API key is missing, was rejected, or may not use the model."""


class ModelRequestError(ModelError):
    """The API refused the request itself: a bad request or an unknown model."""


class ForgeError(OrchestratorError):
    """The forge (GitHub, a local remote) refused or failed an action; the message says which."""


class ForgeWaitError(ForgeError):
    """The forge asks for nothing more before `retry_at` (a rate limit); nothing failed."""

    def __init__(self, message: str, *, retry_at: float) -> None:
        self.retry_at = retry_at
        super().__init__(message)
