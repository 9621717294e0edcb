"""What a person watching `teaparty run` or `teaparty demo` sees while a job works.

On a terminal, a live panel (rich) under the job's messages: the phase and its step, each
task with its mini-team (a busy member marked), elapsed time, tokens and cost so far.
Elsewhere (a pipe, a log file, `--plain`, a dumb terminal) the same facts come as one
plain line per event: a task that changes state, a team that forms or ends. `NO_COLOR`
turns colour off; the panel still updates.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Protocol

from orchestrator.api import Progress, Task, Team

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live

TASK_STATE = {
    "pending": "to do",
    "in_progress": "in progress",
    "in_review": "in review",
    "done": "done",
    "blocked": "blocked",
    "cancelled": "cancelled",
}
_STYLE = {"in progress": "yellow", "in review": "cyan", "done": "green", "blocked": "red"}


class View(Protocol):
    """Where a run's lines and progress go."""

    def say(self, line: str) -> None:
        """Print one line of the run's story."""
        ...

    def update(self, progress: Progress) -> None:
        """The job as it is now."""
        ...

    def paused(self) -> contextlib.AbstractContextManager[None]:
        """Hold the live panel back while a question is asked at the terminal."""
        ...

    def close(self) -> None:
        """Stop updating; leave the terminal as it was."""
        ...


def view_for(env: Mapping[str, str], *, plain: bool) -> View:
    """A live panel on a terminal that can show one, plain lines otherwise."""
    if plain or not sys.stdout.isatty() or env.get("TERM") == "dumb":
        return Lines()
    return LivePanel(no_color=bool(env.get("NO_COLOR")))


def short(agent: str) -> str:
    """An agent's name without its project and workgroup: `widgets/coding/implementer` →
    `implementer`."""
    return agent.rsplit("/", 1)[-1]


def team_names(team: Team | None) -> str:
    """The team's members, a busy one marked with `*`."""
    if team is None:
        return ""
    return ", ".join(short(m.agent) + ("*" if m.busy else "") for m in team.members)


def spent(progress: Progress) -> str:
    usage = progress.status.usage
    return f"{usage.input_tokens + usage.output_tokens:,} tokens · ${progress.status.cost_usd:.4f}"


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(max(seconds, 0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


class Lines:
    """Plain output: one line per event, for pipes, logs and `--plain`."""

    def __init__(self) -> None:
        self._tasks: dict[int, str] = {}
        self._teams: dict[int | None, str] = {}

    def say(self, line: str) -> None:
        print(line, flush=True)

    def update(self, progress: Progress) -> None:
        for task in progress.status.tasks:
            state = TASK_STATE.get(task.state, task.state)
            if self._tasks.get(task.number) != state:
                self._tasks[task.number] = state
                self.say(f"  #{task.number} {task.title}: {state} ({spent(progress)})")
        teams = {team.task: team_names(team).replace("*", "") for team in progress.teams}
        for number, names in teams.items():
            if number is not None and self._teams.get(number) != names:
                self.say(f"  #{number} team: {names}")
        self._teams = teams

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        yield

    def close(self) -> None:
        pass


class LivePanel:
    """A panel kept up to date under the run's lines, four times a second."""

    def __init__(self, *, no_color: bool = False) -> None:
        from rich.console import Console

        self.console: Console = Console(no_color=no_color, highlight=False)
        self.started = time.monotonic()
        self.progress: Progress | None = None
        self.live: Live = self._live()
        self.live.start()

    def _live(self) -> Live:
        from rich.live import Live

        return Live(_Panel(self), console=self.console, refresh_per_second=4, transient=True)

    def say(self, line: str) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def update(self, progress: Progress) -> None:
        self.progress = progress

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Stop the panel for a question; after it, a new panel below what was printed
        (the old one would erase as many lines as it had, the question's among them).
        An interrupted question leaves the panel stopped: the run is ending."""
        self.live.stop()
        yield
        self.live = self._live()
        self.live.start()

    def close(self) -> None:
        self.live.stop()

    def render(self) -> RenderableType:
        from rich.spinner import Spinner
        from rich.table import Table
        from rich.text import Text

        clock = elapsed(time.monotonic() - self.started)
        if self.progress is None:
            return Spinner("dots", Text(f"starting · {clock}", style="dim"))
        status = self.progress.status
        head = Text.assemble(
            (f"job {status.job_id} ", "bold"),
            (status.state, "bold magenta"),
            f" · {status.step} · {clock} · {spent(self.progress)}",
        )
        grid = Table.grid(padding=(0, 2))
        grid.add_row(Spinner("dots"), head)
        lead = team_names(self.progress.team(None))
        if lead:
            grid.add_row("", Text(f"lead: {lead}", style="dim"))
        for task in status.tasks:
            grid.add_row("", _task_row(task, team_names(self.progress.team(task.number))))
        if status.waiting:
            grid.add_row("", Text(status.waiting, style="yellow"))
        return grid


def _task_row(task: Task, team: str) -> RenderableType:
    from rich.text import Text

    state = TASK_STATE.get(task.state, task.state)
    row = Text.assemble(
        f"#{task.number} ", (f"{state:<11}", _STYLE.get(state, "dim")), f" {task.title}"
    )
    if team:
        row.append(f"  {team}", style="dim")
    return row


class _Panel:
    """Rendered afresh at each refresh, so the clock moves between updates."""

    def __init__(self, panel: LivePanel) -> None:
        self.panel = panel

    def __rich__(self) -> RenderableType:
        return self.panel.render()
