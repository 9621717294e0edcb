"""Deliveries become decisions: payloads parsed into commands, one handler per event and action.

Each handler gathers the facts it needs, calls a pure function that returns actions, and
performs them; the decisions are tested from payloads alone.

    payloads.py       webhook payload -> command: PARSERS, one parser per (event, action)
    deliveries.py     the commands: LabelAdded, CommentAdded, ..., PullChanged, ReposRemoved
    payload_fields.py Actor, Repo, Issue, Ignored; the typed accessors the parsers read with
    router.py         command -> the handler of its event and action
    issues.py         issues.labeled: LabelFacts, decide_label, on_issues_labeled
    issue_comment.py  issue_comment.created: CommentFacts, decide_comment, on_issue_comment_created
    pull_request.py   pull_request closed/draft/ready/reopened: PullFacts, decide_pull
    issue_withdrawal.py  issues.closed, issues.unlabeled: decide_closed, decide_unlabeled
    installation.py   installation.deleted, installation_repositories.removed: decide_removed
    actions.py        what a decision says: Ignore, Report, PostOnce, React, StartJob, ...,
                      and after the label EndPull, SetPull, WithdrawJob, LeaveRepos
    perform.py        a decision carried out: PERFORMERS, one performer per action type
    performers.py     the performers on the issue and its gates: post_once, start, answer, ...
    job_orders.py     the performers of a decider's orders (/reopen too) and after the label
    app_context.py    AppContext: the dependencies handlers read and act through, nothing more
    repos.py          a repository's project file and permissions (cached a minute)
    service.py        GitHubService: a stored delivery handled; each job's GitHubForge
"""
