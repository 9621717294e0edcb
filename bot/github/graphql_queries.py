"""The GraphQL documents the App sends to GitHub; the local stand-in serves these and no other.

GitHub quirks the documents answer to:
- `databaseId` of a review comment is deprecated (ids passed 2^31); `fullDatabaseId` is a
  BigInt, which GitHub sends as a string. It is the id REST calls the comment by.
- A bot's `login` in GraphQL has no `[bot]` suffix (`teaparty-demo`, not
  `teaparty-demo[bot]`); `__typename` says `Bot`.
- A connection gives at most 100 nodes per request; `pageInfo.endCursor` goes in `after`.
  A thread with more than 100 comments is read on with `THREAD_COMMENTS`.
tests/test_graphql_documents.py checks each against GitHub's public schema.
"""

from __future__ import annotations

from dataclasses import dataclass

PAGE_SIZE = 100


@dataclass(frozen=True)
class Document:
    """A named GraphQL operation and its text."""

    name: str
    text: str


_PAGE_INFO = "pageInfo { hasNextPage endCursor }"
_COMMENT = """
          fullDatabaseId
          author { __typename login }
          body
          createdAt
          diffHunk
          replyTo { fullDatabaseId }"""

REVIEW_THREADS = Document(
    "ReviewThreads",
    f"""query ReviewThreads($owner: String!, $name: String!, $number: Int!, $after: String) {{
  repository(owner: $owner, name: $name) {{
    pullRequest(number: $number) {{
      reviewThreads(first: {PAGE_SIZE}, after: $after) {{
        {_PAGE_INFO}
        nodes {{
          id
          isResolved
          isOutdated
          path
          line
          originalLine
          comments(first: {PAGE_SIZE}) {{
            {_PAGE_INFO}
            nodes {{{_COMMENT}
            }}
          }}
        }}
      }}
    }}
  }}
}}
""",
)

THREAD_COMMENTS = Document(
    "ThreadComments",
    f"""query ThreadComments($thread: ID!, $after: String) {{
  node(id: $thread) {{
    __typename
    ... on PullRequestReviewThread {{
      comments(first: {PAGE_SIZE}, after: $after) {{
        {_PAGE_INFO}
        nodes {{{_COMMENT}
        }}
      }}
    }}
  }}
}}
""",
)

ADD_THREAD_REPLY = Document(
    "AddThreadReply",
    f"""mutation AddThreadReply($thread: ID!, $body: String!) {{
  addPullRequestReviewThreadReply(input: {{pullRequestReviewThreadId: $thread, body: $body}}) {{
    comment {{
      id{_COMMENT}
    }}
  }}
}}
""",
)

# REST cannot change `draft`: only this mutation marks a draft pull request ready.
MARK_READY = Document(
    "MarkReady",
    """mutation MarkReady($pull: ID!) {
  markPullRequestReadyForReview(input: {pullRequestId: $pull}) {
    pullRequest {
      id
      isDraft
    }
  }
}
""",
)

DOCUMENTS = (REVIEW_THREADS, THREAD_COMMENTS, ADD_THREAD_REPLY, MARK_READY)
