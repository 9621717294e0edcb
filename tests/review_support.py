"""A pull request with a file to review, on the GitHub stand-in (shared by the review tests)."""

from __future__ import annotations

from pathlib import Path

from fakehub_support import NAME, OWNER, push_branch

from bot.fakehub.hub import FakeGitHub

FILE = "app.py"
LINES = 30


def numbered(count: int = LINES, *, changed: dict[int, str] | None = None) -> str:
    """`line 1` … `line <count>`, one per line, with `changed` lines replaced."""
    changed = changed or {}
    return "".join(changed.get(n, f"line {n}") + "\n" for n in range(1, count + 1))


async def open_review_pull(hub: FakeGitHub, work: Path, *, author: str = "alice") -> int:
    """Users alice, bob and carol (writers); `app.py` added on `feature`; the pull request's
    number, opened by `author`."""
    for login in ("alice", "bob", "carol"):
        hub.add_user(login, "write")
    push_branch(hub, work, "feature", {FILE: numbered()})
    return await hub.open_pull_as(
        OWNER, NAME, author=author, head="feature", base="main", title="Add the app"
    )


async def bobs_thread(hub: FakeGitHub, work: Path, line: int, body: str) -> tuple[int, int]:
    """The review pull request (open_review_pull) with bob's comment `body` on `line` of
    FILE, a thread's root: the pull request's number and the root comment's id."""
    number = await open_review_pull(hub, work)
    return number, await hub.comment_on_line(OWNER, NAME, number, "bob", FILE, line, body)


async def many_threads(hub: FakeGitHub, work: Path, prefix: str, body: str) -> int:
    """The review pull request (open_review_pull) after bob's review `body` left 150
    comments, `{prefix}{n}`, over lines 1 to 30 of FILE; the pull request's number."""
    number = await open_review_pull(hub, work)
    comments = [(FILE, 1 + n % 30, f"{prefix}{n}") for n in range(150)]
    await hub.review_pr(OWNER, NAME, number, "bob", "changes_requested", body, comments=comments)
    return number
