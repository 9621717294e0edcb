"""`teaparty learnings`: what a local repository's merged jobs learned, and forgetting one.

`list` reads the learnings files at the repository's HEAD (the kept ones: a job's learnings
are kept once its branch is merged there) and marks those the state directory forgot.
`forget ID` records the id in the store: no task is given it again, and the next job's
branch removes it from its file (kept once that branch is merged, so a lost store forgets
nothing). Exit codes: 0 done, 2 usage (not a repository, not an id), 3 environment (the
store is of another teaparty version), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from bot.command_table import HOME, JSON, Command, Option, fail

if TYPE_CHECKING:
    from orchestrator.api import KeptLearning

EXIT_OK, EXIT_USAGE, EXIT_ENVIRONMENT, EXIT_INTERRUPTED = 0, 2, 3, 130
EXIT_CODES = "exit codes: 0 done, 2 usage, 3 environment (the store is of another version)"
HANDLER = "bot.learnings_cli:learnings_command"
REPO = Option("--repo", type=Path, metavar="PATH", help="the repository (default: here)")
LEARNINGS = Command(
    "learnings",
    help="list what merged jobs learned in a repository, or forget one",
    description="Task learnings: each job proposes a few in .teaparty/learnings/ on its "
    "branch; they are kept once that branch is merged, and later tasks get the most "
    "relevant. --home is the state directory (default $TEAPARTY_HOME, else ~/.teaparty).",
    epilog=EXIT_CODES,
    actions=(
        Command(
            "list",
            help="the learnings at HEAD, forgotten ones marked",
            description="The learnings in .teaparty/learnings/ at the repository's HEAD (those "
            "of merged jobs), each with its id and source; those the state directory forgot "
            "are marked until a job's branch that removes them is merged.",
            epilog=EXIT_CODES,
            options=(JSON.with_help("a JSON list, one object a learning"), REPO, HOME),
            handler=HANDLER,
        ),
        Command(
            "forget",
            help="never give a learning to a task again",
            description="Record the id in the state directory's store: no task is given that "
            "learning again, and the next job's branch removes it from its file (kept once "
            "that branch is merged).",
            epilog=EXIT_CODES,
            options=(
                Option("entry_id", metavar="ID", help="the learning's id (10 hex digits)"),
                REPO,
                HOME,
            ),
            handler=HANDLER,
        ),
    ),
)


def learnings_command(args: argparse.Namespace, environ: Mapping[str, str]) -> int:
    """Run the `teaparty learnings` action `args.action` and return its exit code."""
    # The engine only for a learnings command: building the parser loads none of it.
    from bot.local import state_home
    from orchestrator.api import StoreError, is_learning_id, kept_learnings, repository_top

    home = state_home(args.home, environ)
    try:
        top = asyncio.run(repository_top((args.repo or Path.cwd()).expanduser().resolve()))
        repo = None if top is None else top.resolve()  # as `teaparty run` names it
        if repo is None:
            return _fail(args, f"{args.repo or Path.cwd()} is not a git repository", EXIT_USAGE)
        if args.action == "list":
            return _list(args, asyncio.run(kept_learnings(repo, home)))
        if not is_learning_id(args.entry_id):
            return _fail(args, f"{args.entry_id!r} is not a learning's id", EXIT_USAGE)
        return _forget(args, repo, home)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except StoreError as exc:
        return _fail(args, str(exc), EXIT_ENVIRONMENT)


def _list(args: argparse.Namespace, kept: tuple[KeptLearning, ...]) -> int:
    if args.json:
        print(json.dumps([_json(k) for k in kept], indent=2, ensure_ascii=False))
        return EXIT_OK
    if not kept:
        print("no learnings at HEAD (a job's are kept once its branch is merged)")
    for item in kept:
        mark = "  [forgotten: the next job's branch removes it]" if item.forgotten else ""
        print(f"{item.learning.entry_id}  {item.learning.text}{mark}")
        print(f"            from {item.learning.source}, in {item.path}")
    return EXIT_OK


def _json(item: KeptLearning) -> dict[str, object]:
    learning = item.learning
    return {
        "id": learning.entry_id,
        "text": learning.text,
        "source": learning.source,
        "path": item.path,
        "forgotten": item.forgotten,
    }


def _forget(args: argparse.Namespace, repo: Path, home: Path) -> int:
    from orchestrator.api import forget_learning, kept_learnings

    entry_id = args.entry_id
    by = f"{getpass.getuser()} (teaparty learnings forget)"
    newly = asyncio.run(forget_learning(repo, home, entry_id, by=by))
    known = any(k.learning.entry_id == entry_id for k in asyncio.run(kept_learnings(repo, home)))
    print(
        f"{entry_id} {'forgotten' if newly else 'was forgotten already'}: no task is given it "
        "again; the next job's branch removes it from its file"
        + ("" if known else " (it is in no learnings file at HEAD)")
    )
    return EXIT_OK


def _fail(args: argparse.Namespace, message: str, code: int) -> int:
    as_json = bool(getattr(args, "json", False))
    return fail(f"teaparty learnings {args.action}", message, code, as_json=as_json)
