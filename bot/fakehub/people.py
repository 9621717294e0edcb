"""What people do on a pull request, as helpers of the local GitHub stand-in (FakeGitHub).

Each helper changes the hub's state and the bare remote as GitHub would, then delivers the
webhooks GitHub sends the App: reviews with their inline comments, replies, merges (and the
issues a merged pull request closes: `Closes #N` in its body, merged into the default
branch), closing, pushes to the head, draft changes and deleting the head branch (GitHub
closes the pull request, unmerged). Resolving a thread sends nothing (the App does not
subscribe to `pull_request_review_thread`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from bot.fakehub import git, webhooks
from bot.fakehub.pulls import full_pull_json
from bot.fakehub.review_actions import InlineComment, announce, reply, submit_review
from bot.fakehub.review_state import REVIEW_STATES, ReviewThread
from bot.fakehub.roles import HubRole
from bot.fakehub.shapes import Json
from bot.fakehub.state import HubError, HubIssue, HubRepo

_CLOSES = re.compile(r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\s*:?\s+#(\d+)\b", re.I)


class PullRequestPeople(HubRole):
    """FakeGitHub's helpers that act as people on pull requests."""

    def _pull_request(self, owner: str, name: str, number: int) -> tuple[HubRepo, HubIssue]:
        repo = self.state.repo(owner, name)
        issue = self.state.issue(repo, number)
        if issue.pull is None:
            raise ValueError(f"{owner}/{name}#{number} is not a pull request")
        return repo, issue

    async def review_pr(
        self,
        owner: str,
        name: str,
        number: int,
        reviewer: str,
        state: str,
        body: str | None = None,
        *,
        comments: Sequence[InlineComment] = (),
    ) -> int:
        """Submit a review (`approved`, `changes_requested` or `commented`, any case) with
        inline `comments` as `(path, line, body)`; returns the review id."""
        if (wanted := state.upper()) not in REVIEW_STATES:
            raise ValueError(f"a review is one of {REVIEW_STATES}, not {state!r}")
        repo, issue = self._pull_request(owner, name, number)
        review, made, where = await submit_review(
            self.state,
            repo,
            issue,
            author=reviewer,
            review_state=wanted,
            body=body,
            comments=comments,
        )
        pairs = [(comment, where[comment.thread_id]) for comment in made]
        await self._deliver_all(announce(self.state, repo, issue, review, pairs, self.urls))
        return review.review_id

    async def comment_on_line(
        self, owner: str, name: str, number: int, login: str, path: str, line: int, body: str
    ) -> int:
        """A lone inline comment (a `commented` review of its own); returns the comment id."""
        await self.review_pr(owner, name, number, login, "COMMENTED", comments=[(path, line, body)])
        return self.review_threads(owner, name, number)[-1].root_id

    async def reply_in_thread(
        self, owner: str, name: str, number: int, login: str, comment_id: int, body: str
    ) -> int:
        """Reply in the thread of review comment `comment_id`; returns the reply's id."""
        repo, issue = self._pull_request(owner, name, number)
        review, comment, where = await reply(
            self.state, repo, issue, author=login, to=comment_id, body=body
        )
        await self._deliver_all(
            announce(self.state, repo, issue, review, [(comment, where)], self.urls)
        )
        return comment.comment_id

    def resolve_thread(
        self,
        owner: str,
        name: str,
        number: int,
        comment_id: int,
        login: str,
        *,
        resolved: bool = True,
    ) -> None:
        """Mark the thread of `comment_id` resolved (or, with `resolved=False`, unresolved)."""
        _, issue = self._pull_request(owner, name, number)
        assert issue.pull is not None
        with self.state.lock:
            thread = issue.pull.reviews.thread_of(comment_id)
            if thread is None:
                raise ValueError(f"no review comment {comment_id} on #{number}")
            thread.resolved_by = self.state.user(login).login if resolved else None

    def review_threads(self, owner: str, name: str, number: int) -> list[ReviewThread]:
        """The pull request's review threads, oldest first."""
        _, issue = self._pull_request(owner, name, number)
        assert issue.pull is not None
        with self.state.lock:
            return list(issue.pull.reviews.threads)

    async def push_to_branch(
        self,
        owner: str,
        name: str,
        branch: str,
        login: str,
        files: Mapping[str, str | None],
        *,
        message: str = "A change",
    ) -> str:
        """Commit `files` (None deletes one) on `branch` as `login`; the new commit's sha.

        Delivers nothing: a push to a pull request's head is `push_to_head`.
        """
        repo = self.state.repo(owner, name)
        _, after = git.commit_files(repo.path, branch, files, message=message, login=login)
        return after

    async def push_to_head(
        self,
        owner: str,
        name: str,
        number: int,
        login: str,
        files: Mapping[str, str | None],
        *,
        message: str = "A change",
    ) -> str:
        """Commit on the pull request's head branch as `login` and deliver `synchronize`."""
        repo, issue = self._pull_request(owner, name, number)
        assert issue.pull is not None
        before, after = git.commit_files(
            repo.path, issue.pull.head_ref, files, message=message, login=login
        )
        await self._pull_event(
            repo, issue, "synchronize", login, extra={"before": before, "after": after}
        )
        return after

    async def set_draft(
        self, owner: str, name: str, number: int, login: str, *, draft: bool = True
    ) -> None:
        """Convert to a draft (`converted_to_draft`) or mark ready (`ready_for_review`)."""
        repo, issue = self._pull_request(owner, name, number)
        assert issue.pull is not None
        with self.state.lock:
            if issue.pull.draft == draft:
                return
            issue.pull.draft, issue.updated_at = draft, self.state.clock()
        action = "converted_to_draft" if draft else "ready_for_review"
        await self._pull_event(repo, issue, action, login)

    async def close_pr(self, owner: str, name: str, number: int, login: str) -> None:
        """Close the pull request unmerged and deliver `pull_request.closed`."""
        repo, issue = self._pull_request(owner, name, number)
        self._close(issue, login)
        await self._pull_event(repo, issue, "closed", login)

    async def delete_head_branch(self, owner: str, name: str, number: int, login: str) -> None:
        """Delete the head branch: GitHub closes the open pull request, unmerged."""
        repo, issue = self._pull_request(owner, name, number)
        assert issue.pull is not None
        git.delete_branch(repo.path, issue.pull.head_ref)
        if issue.state == "open":
            self._close(issue, login)
            await self._pull_event(repo, issue, "closed", login)

    async def merge_pr(
        self, owner: str, name: str, number: int, login: str, *, delete_branch: bool = False
    ) -> str:
        """Merge with a merge commit as `login`, deliver `pull_request.closed` (merged), close
        the issues its body closes; returns the merge commit's sha."""
        repo, issue = self._pull_request(owner, name, number)
        pull = issue.pull
        assert pull is not None
        if issue.state != "open":
            raise HubError(405, "Pull Request is not mergeable")
        await full_pull_json(self.state, repo, issue, self.urls)  # follow the branches first
        message = f"Merge pull request #{number} from {pull.head_owner}/{pull.head_ref}"
        try:
            sha = git.merge(repo.path, pull.base_ref, pull.head_ref, message=message, login=login)
        except git.HubGitError:
            raise HubError(405, "Merge conflict") from None
        with self.state.lock:
            pull.merged_at, pull.merged_by = self.state.clock(), self.state.user(login).login
            pull.merge_commit_sha = sha
        self._close(issue, login)
        if delete_branch:
            git.delete_branch(repo.path, pull.head_ref)
        await self._pull_event(repo, issue, "closed", login)
        if pull.base_ref == repo.default_branch:
            await self._close_linked(repo, issue, login)
        return sha

    def _close(self, issue: HubIssue, login: str) -> None:
        self.state.close_issue(issue, by=login)

    async def _close_linked(self, repo: HubRepo, pull: HubIssue, login: str) -> None:
        for number in dict.fromkeys(int(n) for n in _CLOSES.findall(pull.body or "")):
            issue = repo.issues.get(number)
            if issue is None or issue.pull is not None or issue.state != "open":
                continue
            self._close(issue, login)
            payload = webhooks.issue_closed(self.state, repo, issue, self.urls, sender=login)
            await self._deliver_all([("issues", payload)])

    async def _pull_event(
        self, repo: HubRepo, issue: HubIssue, action: str, login: str, *, extra: Json | None = None
    ) -> None:
        pull = await full_pull_json(self.state, repo, issue, self.urls)
        payload = webhooks.pull_request_event(
            self.state, repo, issue, pull, self.urls, action=action, sender=login, extra=extra
        )
        await self._deliver_all([("pull_request", payload)])
