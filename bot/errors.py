"""The GitHub edge's errors.

BotError
 ├── SettingsError      the environment does not describe a working App (every problem)
 ├── DeliveryError      a webhook delivery refused (carries the HTTP status to answer)
 ├── NotYetError        a delivery that cannot be decided yet: handled again at `retry_at`
 ├── PayloadError       (bot.handlers.payloads) a payload lacks or mistypes a field we need
 └── GitHubError        a GitHub API call failed for good
      ├── RateLimitedError   GitHub asked us to wait longer than we wait in one call
      └── GraphQLError       GitHub answered a GraphQL call with errors (carries them)

Runner mode's state ref raises the engine's StateError (an OrchestratorError, from the
engine's StoreRef); bot.runner.state_records draws its tree and the runner's StateBusyError.
"""

from __future__ import annotations


class BotError(Exception):
    """Root of the GitHub edge's errors."""


class SettingsError(BotError):
    """Settings are missing or unusable: `problems`, each naming its variable or option."""

    def __init__(self, *problems: str) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class DeliveryError(BotError):
    """A delivery is refused with `status`; the message says why."""

    def __init__(self, status: int, message: str, *, delivery_id: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.delivery_id = delivery_id


class NotYetError(BotError):
    """A delivery cannot be decided until something under way is recorded (a question being
    posted); it is handled again at `retry_at` (epoch seconds), spending no attempt."""

    def __init__(self, message: str, *, retry_at: float) -> None:
        super().__init__(message)
        self.retry_at = retry_at


class GitHubError(BotError):
    """A GitHub API call failed after its retries."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class RateLimitedError(GitHubError):
    """GitHub's rate limit holds until `retry_at` (epoch seconds)."""

    def __init__(self, message: str, *, retry_at: float, status: int | None = None) -> None:
        super().__init__(message, status=status)
        self.retry_at = retry_at


class GraphQLError(GitHubError):
    """A GraphQL answer with `errors` (each a dict with `message`, often `type` and `path`)."""

    def __init__(self, message: str, *, errors: list[dict[str, object]]) -> None:
        super().__init__(message, status=200)
        self.errors = errors


# `teaparty run`'s exit codes, here so that the command line's parser says them without
# loading the engine (bot/local.py runs the command).
RUN_EXIT_CODES = (
    "exit codes: 0 delivered (a branch with the work), 1 failed or ended without delivering "
    "(e.g. a rejected plan), 2 usage or configuration error (a refused model key too), "
    "3 environment (the store is in use, the model's API unreachable), 4 waiting at a "
    "question nobody can answer here (no terminal, --no-input), 130 interrupted"
)
