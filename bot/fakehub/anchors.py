"""Where a pull request's review threads point now: the line, the diff position, or outdated.

GitHub keeps a review comment on its line while later commits leave that line alone (lines
above it may move it down or up); once a commit changes the line, or the line is no longer
part of the pull request's diff, the comment is outdated: `line` and `position` are null and
only `original_line` and `diff_hunk` say where it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from bot.fakehub import diffs, git
from bot.fakehub.review_state import ReviewComment
from bot.fakehub.state import HubRepo, HubState, PullInfo


@dataclass(frozen=True)
class Anchor:
    """Where a thread's comments point at the pull request's head (None: outdated)."""

    line: int | None
    position: int | None
    commit_id: str

    @property
    def outdated(self) -> bool:
        """Whether the commented line is gone from the diff or was changed since."""
        return self.line is None


async def anchors(state: HubState, repo: HubRepo, pull: PullInfo) -> dict[int, Anchor]:
    """The anchor of every thread of `pull`, by thread id."""
    with state.lock:
        base, head = pull.base_sha, pull.head_sha
        roots = [pull.reviews.comments[t.root_id] for t in pull.reviews.threads]
    if not roots:
        return {}
    shown = diffs.parse(await git.diff(repo.path, base, head))
    moves: dict[str, dict[str, diffs.FileDiff]] = {}
    found: dict[int, Anchor] = {}
    for root in roots:
        commit = root.original_commit_id
        if commit not in moves:
            text = await git.diff(repo.path, commit, head, context=0, from_merge_base=False)
            moves[commit] = diffs.parse(text)
        found[root.thread_id] = _anchor(root, shown, moves[commit], head)
    return found


def _anchor(
    root: ReviewComment,
    shown: dict[str, diffs.FileDiff],
    moves: dict[str, diffs.FileDiff],
    head: str,
) -> Anchor:
    outdated = Anchor(None, None, root.original_commit_id)
    moved = moves.get(root.path)
    line = root.original_line if moved is None else moved.moved(root.original_line)
    if line is None or (diff := shown.get(root.path)) is None:
        return outdated
    if (located := diff.locate(line)) is None:
        return outdated
    return Anchor(line, located[0], head)
