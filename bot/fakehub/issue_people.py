"""What people do to an issue besides labelling and editing it, as helpers of the local GitHub
stand-in (FakeGitHub): close it, take a label off. Each changes the hub's state as GitHub
would and delivers the webhook GitHub sends the App; GitHub sends nothing for a change that
changes nothing, and neither do these.
"""

from __future__ import annotations

from bot.fakehub import webhooks
from bot.fakehub.roles import HubRole


class IssuePeople(HubRole):
    """FakeGitHub's helpers that act as people on issues."""

    async def unlabel_issue(
        self, owner: str, name: str, number: int, label: str, *, sender: str
    ) -> str | None:
        """Take `label` off as `sender` and deliver `issues.unlabeled`; the delivery id, or
        None when the issue did not have it (GitHub then sends nothing)."""
        state = self.state
        repo = state.repo(owner, name)
        issue = state.issue(repo, number)
        removed = state.remove_label(repo, issue, label)
        if removed is None:
            return None
        payload = webhooks.issue_unlabeled(state, repo, issue, removed, self.urls, sender=sender)
        return (await self._deliver("issues", payload)).delivery_id

    async def close_issue(self, owner: str, name: str, number: int, *, sender: str) -> str | None:
        """Close the issue as `sender` and deliver `issues.closed`; the delivery id, or None
        when it was closed already."""
        state = self.state
        repo = state.repo(owner, name)
        issue = state.issue(repo, number)
        if issue.pull is not None:
            raise ValueError(f"{owner}/{name}#{number} is a pull request: close_pr closes it")
        if not state.close_issue(issue, by=sender):
            return None
        payload = webhooks.issue_closed(state, repo, issue, self.urls, sender=sender)
        return (await self._deliver("issues", payload)).delivery_id
