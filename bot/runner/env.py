"""What a workflow run gives `teaparty action` (its environment and event), read cheaply.

Kept apart from bot/runner/action.py, which loads the engine: a run whose event concerns no
job (the App's own comment) decides so with this module alone and exits in well under a
second.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bot.errors import SettingsError
from bot.handlers.payloads import parse_command
from bot.settings import DEFAULT_API_URL, DEFAULT_SERVER_URL, setup_secret_names

CONTINUATION = "workflow_dispatch"  # the event of a run that carries on after a parked one
ACTIONS_LOGIN = "github-actions[bot]"  # who GITHUB_TOKEN writes as
ACTIONS_APP_ID = 15368  # the GitHub Actions App, as `performed_via_github_app.id` names it
DEFAULT_TIMEOUT_MINUTES = 345.0  # hosted runners stop a job at 6 h; park well before
# The run starts no model or tool call this long before its time limit; what is under way
# then must end within it. The longest call in flight ends within 300 s (a shell or git call
# at its own time limit; a model call writing its 8,192 tokens takes a few minutes at the
# slowest), then each job's sync, the preserve push and the state save take about a minute,
# and the job's steps before this process (checkout, Python, the install) count against its
# timeout-minutes but not against this run's clock: a minute or two more. 300 s covered the
# call or the rest, not both.
MARGIN_S = 600.0
# What of the run's environment reaches the engine (`teaparty serve` is given all of its
# own): PATH, whose entries the sandbox can see come first on agents' PATH (the Python of a
# setup-python step before the composite action, with what was installed into it), and the
# bound of the setup cache. The operator's setup secrets are added by name.
ENGINE_GETS = ("PATH", "TEAPARTY_SETUP_CACHE_MB")


@dataclass(frozen=True)
class ActionEnv:
    """What a workflow run gives `teaparty action`; secrets never appear in repr."""

    event_name: str
    event_path: Path
    owner: str
    repo: str
    run_id: str
    home: Path
    token: str = field(repr=False, default="")
    app_id: str = ""
    private_key: str = field(repr=False, default="")
    api_url: str = DEFAULT_API_URL
    server_url: str = DEFAULT_SERVER_URL
    summary_path: Path | None = None
    output_path: Path | None = None  # GITHUB_OUTPUT: the step's outputs (setup-key)
    timeout_s: float = DEFAULT_TIMEOUT_MINUTES * 60
    bot_login: str = ACTIONS_LOGIN
    bot_app_id: int | None = ACTIONS_APP_ID
    workflow_ref: str = ""  # GITHUB_WORKFLOW_REF: owner/repo/.github/workflows/f.yml@ref
    setup_secrets: tuple[str, ...] = ()  # TEAPARTY_SETUP_SECRETS: a setup step's variables
    # The whole environment, from which the engine learns every secret value it holds
    # (none of it reaches an agent: runner mode gives agents' processes nothing from it).
    environ: Mapping[str, str] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, home: Path) -> ActionEnv:
        """Read the run's environment; SettingsError lists every missing or bad value."""
        problems: list[str] = []

        def need(name: str) -> str:
            value = environ.get(name, "").strip()
            if not value:
                problems.append(f"{name} is not set (GitHub Actions sets it for every run)")
            return value

        event_name, event_path = need("GITHUB_EVENT_NAME"), need("GITHUB_EVENT_PATH")
        repository, run_id = need("GITHUB_REPOSITORY"), need("GITHUB_RUN_ID")
        owner, _, repo = repository.partition("/")
        if repository and (not owner or not repo or "/" in repo):
            problems.append(f"GITHUB_REPOSITORY is {repository!r}, not owner/name")
        token = environ.get("GITHUB_TOKEN", "").strip()
        app_id = environ.get("GITHUB_APP_ID", "").strip()
        key = environ.get("GITHUB_APP_PRIVATE_KEY", "").strip()
        if not token and not (app_id and key):
            problems.append(
                "neither GITHUB_TOKEN nor GITHUB_APP_ID with GITHUB_APP_PRIVATE_KEY is set: "
                "pass the workflow's token (env: GITHUB_TOKEN: ${{ github.token }})"
            )
        timeout_s = _time_limit(environ.get("TEAPARTY_TIMEOUT_MINUTES", "").strip(), problems)
        bot_app = environ.get("TEAPARTY_BOT_APP_ID", "").strip()
        if bot_app and not bot_app.isdigit():
            problems.append(f"TEAPARTY_BOT_APP_ID is {bot_app!r}, not a number")
        setup: tuple[str, ...] = ()
        try:
            setup = setup_secret_names(environ)
        except SettingsError as exc:
            problems.extend(exc.problems)
        if problems:
            raise SettingsError(*problems)
        summary = environ.get("GITHUB_STEP_SUMMARY", "").strip()
        output = environ.get("GITHUB_OUTPUT", "").strip()
        return cls(
            event_name=event_name,
            event_path=Path(event_path),
            owner=owner,
            repo=repo,
            run_id=run_id,
            home=home,
            token=token,
            app_id=app_id,
            private_key=key,
            api_url=environ.get("GITHUB_API_URL", "").strip() or DEFAULT_API_URL,
            server_url=environ.get("GITHUB_SERVER_URL", "").strip() or DEFAULT_SERVER_URL,
            summary_path=Path(summary) if summary else None,
            output_path=Path(output) if output else None,
            timeout_s=timeout_s,
            bot_login=environ.get("TEAPARTY_BOT_LOGIN", "").strip() or ACTIONS_LOGIN,
            bot_app_id=int(bot_app) if bot_app else ACTIONS_APP_ID,
            workflow_ref=environ.get("GITHUB_WORKFLOW_REF", "").strip(),
            setup_secrets=setup,
            environ=dict(environ),
        )

    @property
    def engine_env(self) -> dict[str, str]:
        """The variables the engine is given: ENGINE_GETS and the setup secrets, where set
        (agents' processes get none of the secrets: orchestrator/core/secrecy.py)."""
        names = (*ENGINE_GETS, *self.setup_secrets)
        return {name: self.environ[name] for name in names if self.environ.get(name)}

    @property
    def app_mode(self) -> bool:
        """Whether the run acts as a GitHub App (its credentials given) rather than the token."""
        return bool(self.app_id and self.private_key)


def ignored_cheaply(event_name: str, payload: Mapping[str, object], login: str) -> str | None:
    """Why an event needs no store at all (the App's own comment, say), or None: such a run
    exits before loading anything."""
    command = parse_command(event_name, dict(payload), app_login=login)
    reason = getattr(command, "reason", None)
    return reason if isinstance(reason, str) else None


def _time_limit(minutes: str, problems: list[str]) -> float:
    """The run's time limit in seconds, from TEAPARTY_TIMEOUT_MINUTES (the default when
    empty); what is wrong with it goes to `problems`."""
    if not minutes:
        return DEFAULT_TIMEOUT_MINUTES * 60
    try:
        timeout_s = float(minutes) * 60
    except ValueError:
        problems.append(f"TEAPARTY_TIMEOUT_MINUTES is {minutes!r}, not a number")
        return DEFAULT_TIMEOUT_MINUTES * 60
    if timeout_s <= MARGIN_S:  # each run would park at once and start another
        problems.append(
            f"TEAPARTY_TIMEOUT_MINUTES is {minutes}: a run starts no work in its last "
            f"{MARGIN_S / 60:g} minutes, so it must be more than that"
        )
    return timeout_s
