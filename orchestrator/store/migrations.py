"""The store's schema as numbered migrations; version N is MIGRATIONS[N - 1]."""

from __future__ import annotations

INITIAL = """
CREATE TABLE jobs (
    job_id      INTEGER PRIMARY KEY,
    job_key     TEXT NOT NULL UNIQUE,
    project     TEXT NOT NULL,
    title       TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'active'
                CHECK (state IN ('active', 'complete', 'failed', 'withdrawn')),
    result      TEXT,
    created_at  REAL NOT NULL,
    updated_at  REAL NOT NULL
);

CREATE TABLE conversations (
    conversation_id TEXT PRIMARY KEY,
    kind            TEXT NOT NULL,
    state           TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'closed')),
    awaiting_input  INTEGER NOT NULL DEFAULT 0,
    in_turn         INTEGER NOT NULL DEFAULT 0,
    parent_id       TEXT REFERENCES conversations (conversation_id),
    agent           TEXT NOT NULL,
    initiator       TEXT NOT NULL,
    job_id          INTEGER REFERENCES jobs (job_id),
    last_seq        INTEGER NOT NULL DEFAULT 0,
    result          TEXT,
    created_at      REAL NOT NULL,
    closed_at       REAL
);
CREATE INDEX conversations_parent ON conversations (parent_id);
CREATE INDEX conversations_job ON conversations (job_id);

CREATE TABLE messages (
    message_id          INTEGER PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations (conversation_id),
    seq                 INTEGER NOT NULL,
    sender              TEXT NOT NULL,
    role                TEXT NOT NULL CHECK (role IN ('user', 'assistant', 'tool')),
    content             TEXT NOT NULL,
    input_tokens        INTEGER,
    output_tokens       INTEGER,
    cache_read_tokens   INTEGER,
    cache_write_tokens  INTEGER,
    created_at          REAL NOT NULL,
    UNIQUE (conversation_id, seq)
);

CREATE TABLE agent_contexts (
    context_id          TEXT PRIMARY KEY REFERENCES conversations (conversation_id),
    parent_context_id   TEXT REFERENCES agent_contexts (context_id),
    initiator           TEXT NOT NULL,
    recipient           TEXT NOT NULL,
    status              TEXT NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    opening_call_id     TEXT,
    request_call_id     TEXT,
    serving_call_id     TEXT,
    shutdown_requested_by TEXT,
    pending_count       INTEGER NOT NULL DEFAULT 0 CHECK (pending_count >= 0),
    created_at          REAL NOT NULL
);
CREATE INDEX agent_contexts_parent ON agent_contexts (parent_context_id);

CREATE TABLE inbox (
    item_id             INTEGER PRIMARY KEY,
    conversation_id     TEXT NOT NULL REFERENCES conversations (conversation_id),
    kind                TEXT NOT NULL,
    sender              TEXT NOT NULL,
    call_id             TEXT,
    source_conversation TEXT,
    content             TEXT NOT NULL,
    created_at          REAL NOT NULL
);
CREATE INDEX inbox_conversation ON inbox (conversation_id, item_id);
"""

BOARD_AND_GATES = """
CREATE TABLE tasks (
    task_id         INTEGER PRIMARY KEY,
    job_id          INTEGER NOT NULL REFERENCES jobs (job_id),
    number          INTEGER NOT NULL,
    title           TEXT NOT NULL,
    spec            TEXT NOT NULL,
    workgroup       TEXT,
    review          TEXT NOT NULL DEFAULT 'full' CHECK (review IN ('full', 'spec-only', 'none')),
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'in_progress', 'in_review', 'done', 'blocked',
                                     'cancelled')),
    result          TEXT,
    blocked_reason  TEXT,
    created_by      TEXT NOT NULL,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    UNIQUE (job_id, number)
);

CREATE TABLE task_deps (
    task_id     INTEGER NOT NULL REFERENCES tasks (task_id),
    blocked_by  INTEGER NOT NULL REFERENCES tasks (task_id),
    PRIMARY KEY (task_id, blocked_by),
    CHECK (task_id != blocked_by)
);

CREATE TABLE gates (
    gate_id         INTEGER PRIMARY KEY,
    job_id          INTEGER REFERENCES jobs (job_id),
    conversation_id TEXT NOT NULL REFERENCES conversations (conversation_id),
    call_id         TEXT NOT NULL,
    kind            TEXT NOT NULL
                    CHECK (kind IN ('plan', 'question', 'escalation', 'pull_request')),
    question        TEXT NOT NULL,
    options         TEXT,
    asked_by        TEXT NOT NULL,
    decider         TEXT,
    comment_ref     TEXT,
    answer          TEXT,
    answered_by     TEXT,
    answered_via    TEXT CHECK (answered_via IN ('human', 'proxy')),
    asked_at        REAL NOT NULL,
    answered_at     REAL,
    UNIQUE (conversation_id, call_id)
);
CREATE INDEX gates_open ON gates (job_id) WHERE answer IS NULL;
"""

TEAMS = """
ALTER TABLE jobs ADD COLUMN max_parallel INTEGER NOT NULL DEFAULT 3 CHECK (max_parallel >= 1);
ALTER TABLE conversations ADD COLUMN task_id INTEGER REFERENCES tasks (task_id);
CREATE INDEX conversations_task ON conversations (task_id) WHERE task_id IS NOT NULL;
ALTER TABLE tasks ADD COLUMN resolves INTEGER;

CREATE TABLE job_workspaces (
    job_id      INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    mirror      TEXT NOT NULL,
    branch      TEXT NOT NULL UNIQUE,
    base        TEXT NOT NULL,
    path        TEXT NOT NULL,
    removed     INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE worktree_slots (
    path        TEXT PRIMARY KEY,
    mirror      TEXT NOT NULL,
    task_id     INTEGER UNIQUE REFERENCES tasks (task_id),
    leased_at   REAL
);

CREATE TABLE task_log (
    entry_id    INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    task_number INTEGER,
    event       TEXT NOT NULL,
    detail      TEXT NOT NULL DEFAULT '',
    at          REAL NOT NULL
);
CREATE INDEX task_log_job ON task_log (job_id, entry_id);
"""

FORGE = """
CREATE TABLE deliveries (
    delivery_id     TEXT PRIMARY KEY,
    event           TEXT NOT NULL,
    action          TEXT NOT NULL DEFAULT '',
    body            BLOB NOT NULL,
    received_at     REAL NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'done', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at REAL NOT NULL,
    outcome         TEXT,
    error           TEXT,
    finished_at     REAL
);
CREATE INDEX deliveries_due ON deliveries (state, next_attempt_at);

CREATE TABLE job_links (
    job_id      INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    forge       TEXT NOT NULL,
    subject     TEXT NOT NULL
);

CREATE TABLE forge_objects (
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    key         TEXT NOT NULL,
    external_id TEXT NOT NULL,
    digest      TEXT NOT NULL DEFAULT '',
    updated_at  REAL NOT NULL,
    PRIMARY KEY (job_id, key)
);
"""

# Each job gets a repository of its own (orchestrator/workspace/layout.py); NULL marks a job whose
# branches still live in the shared mirror, moved on first use. Task slots are then keyed
# by that repository, in the existing `mirror` column.
JOB_REPOSITORIES = """
ALTER TABLE job_workspaces ADD COLUMN repo TEXT;
"""

# Facts that lived in memory until now. A job keeps the project file and learnings it runs
# under, so a restart rebuilds its project as it was (an App job's link held them, if at
# all). A failure is a row: a conversation that raised, or a job whose delivery failed; it
# stays until someone asks for a retry, so a restart neither forgets it nor re-runs it.
JOB_PROJECTS_AND_FAILURES = """
ALTER TABLE jobs ADD COLUMN project_text TEXT;
ALTER TABLE jobs ADD COLUMN learnings TEXT;
UPDATE jobs SET
    project_text = (SELECT json_extract(l.subject, '$.project_yaml') FROM job_links l
                    WHERE l.job_id = jobs.job_id AND json_valid(l.subject)),
    learnings = (SELECT json_extract(l.subject, '$.learnings') FROM job_links l
                 WHERE l.job_id = jobs.job_id AND json_valid(l.subject));

CREATE TABLE failures (
    failure_key TEXT PRIMARY KEY,
    job_id      INTEGER REFERENCES jobs (job_id),
    kind        TEXT NOT NULL CHECK (kind IN ('conversation', 'delivery')),
    reason      TEXT NOT NULL,
    failed_at   REAL NOT NULL
);
CREATE INDEX failures_by_job ON failures (job_id);

-- Where a job's repository comes from, so its workspace is made in the job's own time (and
-- again after a crash before it was); `ready` holds its first turn until it exists.
CREATE TABLE job_sources (
    job_id  INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    repo    TEXT NOT NULL,
    source  TEXT NOT NULL,
    start   TEXT NOT NULL,
    branch  TEXT NOT NULL,
    slug    TEXT NOT NULL
);
ALTER TABLE jobs ADD COLUMN ready INTEGER NOT NULL DEFAULT 1;
"""

# Waiting is a fact too: a conversation whose model is overloaded, or a job GitHub asked to
# slow down, waits `until` a time in the store, not in a sleeping task, and its outage
# counts from `since`. A job branch is unique in its repository, not across the store
# (issue #1 of two repositories may share a title). A failure may be the job's workspace.
WAITS_AND_WORKSPACE_KEYS = """
CREATE TABLE waits (
    wait_key    TEXT PRIMARY KEY,
    job_id      INTEGER REFERENCES jobs (job_id),
    kind        TEXT NOT NULL CHECK (kind IN ('model', 'forge')),
    reason      TEXT NOT NULL,
    since       REAL NOT NULL,
    until       REAL NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 1
);
CREATE INDEX waits_by_job ON waits (job_id);

CREATE TABLE job_workspaces_new (
    job_id      INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    mirror      TEXT NOT NULL,
    branch      TEXT NOT NULL,
    base        TEXT NOT NULL,
    path        TEXT NOT NULL,
    removed     INTEGER NOT NULL DEFAULT 0,
    repo        TEXT,
    UNIQUE (mirror, branch)
);
INSERT INTO job_workspaces_new (job_id, mirror, branch, base, path, removed, repo)
    SELECT job_id, mirror, branch, base, path, removed, repo FROM job_workspaces;
DROP TABLE job_workspaces;
ALTER TABLE job_workspaces_new RENAME TO job_workspaces;

CREATE TABLE failures_new (
    failure_key TEXT PRIMARY KEY,
    job_id      INTEGER REFERENCES jobs (job_id),
    kind        TEXT NOT NULL CHECK (kind IN ('conversation', 'delivery', 'workspace')),
    reason      TEXT NOT NULL,
    failed_at   REAL NOT NULL
);
INSERT INTO failures_new SELECT failure_key, job_id, kind, reason, failed_at FROM failures;
DROP TABLE failures;
ALTER TABLE failures_new RENAME TO failures;
CREATE INDEX failures_by_job ON failures (job_id);
"""

# A gate answered from a comment records which one (`answer_ref`): the same comment, seen
# twice (a webhook and a catch-up pass), answers one gate, once.
GATE_ANSWER_REFS = """
ALTER TABLE gates ADD COLUMN answer_ref TEXT;
CREATE UNIQUE INDEX gates_by_answer_ref ON gates (answer_ref) WHERE answer_ref IS NOT NULL;
"""

# What a gate asks about is hashed (`content_hash`, at `hashed_at`): an approval names the
# hash it saw, and one given for other content is stale.
GATE_CONTENT_HASHES = """
ALTER TABLE gates ADD COLUMN content_hash TEXT;
ALTER TABLE gates ADD COLUMN hashed_at REAL;
UPDATE gates SET hashed_at = asked_at;
"""

# A job its decider holds makes no new model calls (`paused_by`); direction for its lead
# (`/steer`) is kept, once per source, to be shown with the job.
JOB_HOLDS_AND_STEERING = """
ALTER TABLE jobs ADD COLUMN paused_by TEXT;
CREATE TABLE job_steering (
    steer_id    INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    text        TEXT NOT NULL,
    given_by    TEXT NOT NULL,
    source_ref  TEXT UNIQUE,
    given_at    REAL NOT NULL
);
CREATE INDEX job_steering_by_job ON job_steering (job_id);
"""

# A command for a job from another process: `teaparty jobs cancel` while `teaparty serve` or
# a `teaparty run` holds the store writes a row, and the holder carries it out on its next
# pass (orchestrator/jobs/commands.py). A gate of a cancelled job is closed unanswered
# (`closed_at`): nobody answers it any more.
JOB_COMMANDS = """
CREATE TABLE job_commands (
    command_id      INTEGER PRIMARY KEY,
    job_id          INTEGER NOT NULL REFERENCES jobs (job_id),
    kind            TEXT NOT NULL CHECK (kind IN ('cancel')),
    requested_by    TEXT NOT NULL,
    requested_at    REAL NOT NULL,
    state           TEXT NOT NULL DEFAULT 'pending'
                    CHECK (state IN ('pending', 'done', 'failed')),
    outcome         TEXT,
    finished_at     REAL
);
CREATE INDEX job_commands_pending ON job_commands (command_id) WHERE state = 'pending';
ALTER TABLE gates ADD COLUMN closed_at REAL;
"""

# A question left unanswered past the project's `close_after_days` closes its job once
# (paused, resumable); `closed_idle_at` says it did, so a resumed job is not closed again.
GATES_CLOSED_IDLE = """
ALTER TABLE gates ADD COLUMN closed_idle_at REAL;
"""

# What a decider asked to be remembered for a project (`/remember`): every agent of the
# project reads it from then on. A job's own spending cap set from the issue (`/budget`).
PREFERENCES_AND_JOB_BUDGETS = """
CREATE TABLE project_preferences (
    preference_id   INTEGER PRIMARY KEY,
    project         TEXT NOT NULL,
    text            TEXT NOT NULL,
    given_by        TEXT NOT NULL,
    source_ref      TEXT UNIQUE,
    given_at        REAL NOT NULL
);
CREATE INDEX project_preferences_by_project ON project_preferences (project);
ALTER TABLE jobs ADD COLUMN budget_usd REAL;
"""

# The human proxy's record (orchestrator/proxy/): one row per gate it was consulted on, with
# its prediction (or none, and why), whether it answered alone, and once known the decider's
# answer or override and whether they agreed; what it measures its autonomy from. A job may
# let it answer every eligible gate (`auto`, the edge's label). The audit sample's seed is
# the store's own, so which gates still go to the decider is reproducible here and unknown
# elsewhere.
PROXY_DECISIONS = """
CREATE TABLE proxy_decisions (
    gate_id         INTEGER PRIMARY KEY REFERENCES gates (gate_id),
    job_id          INTEGER REFERENCES jobs (job_id),
    project         TEXT NOT NULL,
    decider         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    answer          TEXT,
    confidence      REAL CHECK (confidence BETWEEN 0 AND 1),
    reasons         TEXT NOT NULL DEFAULT '',
    measured        REAL,
    agreement       REAL NOT NULL,
    comparable      INTEGER NOT NULL DEFAULT 0,
    policy          TEXT NOT NULL,
    guarded         INTEGER NOT NULL DEFAULT 0,
    min_decisions   INTEGER NOT NULL DEFAULT 5,
    alone           INTEGER NOT NULL DEFAULT 0,
    why             TEXT NOT NULL,
    input_tokens    INTEGER NOT NULL DEFAULT 0,
    output_tokens   INTEGER NOT NULL DEFAULT 0,
    predicted_at    REAL NOT NULL,
    announced_at    REAL,
    actual          TEXT,
    agreed          INTEGER,
    decided_at      REAL,
    override        TEXT,
    overridden_by   TEXT,
    override_ref    TEXT,
    CHECK (answer IS NOT NULL OR (alone = 0 AND confidence IS NULL))
);
CREATE INDEX proxy_decisions_history ON proxy_decisions (project, decider, kind);
CREATE INDEX proxy_decisions_unsettled ON proxy_decisions (gate_id)
    WHERE actual IS NULL AND alone = 0;
CREATE INDEX proxy_decisions_unannounced ON proxy_decisions (job_id)
    WHERE alone = 1 AND announced_at IS NULL;
CREATE UNIQUE INDEX proxy_decisions_by_override_ref
    ON proxy_decisions (override_ref) WHERE override_ref IS NOT NULL;

CREATE TABLE proxy_jobs (
    job_id  INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    auto    INTEGER NOT NULL,
    set_by  TEXT NOT NULL,
    set_at  REAL NOT NULL
);

CREATE TABLE proxy_settings (
    name    TEXT PRIMARY KEY,
    value   TEXT NOT NULL
);
INSERT INTO proxy_settings (name, value) VALUES ('seed', lower(hex(randomblob(16))));
"""

# Gates the engine itself asks (intent, plan, budget, merge-conflict, protected-path) beside
# an agent's questions: the kind's CHECK widens (SQLite rebuilds the table for that, with
# foreign keys off while it runs), and `payload` keeps what the engine acts on once the gate
# is answered (the dispatches a plan gate holds, the head a protected-path gate pins). A job
# keeps the gate modes its project had when it started (`gate_modes`, JSON; NULL: defaults).
GATE_KINDS = """
CREATE TABLE gates_new (
    gate_id         INTEGER PRIMARY KEY,
    job_id          INTEGER REFERENCES jobs (job_id),
    conversation_id TEXT NOT NULL REFERENCES conversations (conversation_id),
    call_id         TEXT NOT NULL,
    kind            TEXT NOT NULL
                    CHECK (kind IN ('intent', 'plan', 'question', 'budget', 'merge-conflict',
                                    'protected-path', 'escalation', 'pull_request')),
    question        TEXT NOT NULL,
    options         TEXT,
    asked_by        TEXT NOT NULL,
    decider         TEXT,
    comment_ref     TEXT,
    answer          TEXT,
    answered_by     TEXT,
    answered_via    TEXT CHECK (answered_via IN ('human', 'proxy')),
    asked_at        REAL NOT NULL,
    answered_at     REAL,
    answer_ref      TEXT,
    content_hash    TEXT,
    hashed_at       REAL,
    closed_at       REAL,
    closed_idle_at  REAL,
    payload         TEXT,
    UNIQUE (conversation_id, call_id)
);
INSERT INTO gates_new (gate_id, job_id, conversation_id, call_id, kind, question, options,
    asked_by, decider, comment_ref, answer, answered_by, answered_via, asked_at, answered_at,
    answer_ref, content_hash, hashed_at, closed_at, closed_idle_at)
SELECT gate_id, job_id, conversation_id, call_id, kind, question, options,
    asked_by, decider, comment_ref, answer, answered_by, answered_via, asked_at, answered_at,
    answer_ref, content_hash, hashed_at, closed_at, closed_idle_at FROM gates;
DROP TABLE gates;
ALTER TABLE gates_new RENAME TO gates;
CREATE INDEX gates_open ON gates (job_id) WHERE answer IS NULL;
CREATE UNIQUE INDEX gates_by_answer_ref ON gates (answer_ref) WHERE answer_ref IS NOT NULL;
ALTER TABLE jobs ADD COLUMN gate_modes TEXT;
"""

# A job's own token cap (an approved budget gate raises it, as `/budget` sets budget_usd);
# the proxy's tokens are read per job, for the job's budget.
JOB_TOKEN_BUDGETS = """
ALTER TABLE jobs ADD COLUMN budget_tokens INTEGER;
CREATE INDEX proxy_decisions_by_job ON proxy_decisions (job_id);
"""

# What a job's issue said, edit by edit (bus/revisions.py): the text the job started with
# (`original`), then each edit seen after the label and what became of it: `asked` at the
# intent gate `gate_id`, `approved` or `rejected` there, `replaced` by a later edit before an
# answer, or `reverted` (an edit back to the text the job works to). A gate keeps what it
# pins (`pinned`, JSON), so it is hashed again when the text its job works to changes.
ISSUE_REVISIONS = """
CREATE TABLE issue_revisions (
    revision_id INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    title       TEXT NOT NULL,
    body        TEXT NOT NULL,
    state       TEXT NOT NULL CHECK (state IN ('original', 'asked', 'approved', 'rejected',
                                               'replaced', 'reverted')),
    edited_by   TEXT,
    edited_at   REAL,
    recorded_at REAL NOT NULL,
    gate_id     INTEGER REFERENCES gates (gate_id)
);
CREATE INDEX issue_revisions_job ON issue_revisions (job_id);
ALTER TABLE gates ADD COLUMN pinned TEXT;
"""

# A job's pull request, once delivered (jobs/rounds.py): its number and what became of it;
# and its review rounds. A round gathers points (a review's text, a review thread with a
# person's new comment, a mention) while queued, runs as one unit (one push, one reply per
# point it answers), and ends delivered or stopped. At most one round of a job is queued
# and one running. A point's `source` names what it came from and the newest comment it
# carries, so a redelivered review adds nothing; `review_threads.handled` is, per thread, the
# newest comment a round has handled: a thread is input again only after a newer one. A
# task's `allowance_usd` is what its lead gave its mini-team to spend (jobs/budget.py); a
# round's spend is capped by `rounds.max_usd` until its decider approves more (`uncapped`);
# a task the engine made to merge a base branch the pull request conflicts with names the
# base's commit (`merge_base`), merged into its worktree with the conflict markers left.
REVIEW_ROUNDS = """
CREATE TABLE job_pulls (
    job_id     INTEGER PRIMARY KEY REFERENCES jobs (job_id),
    number     INTEGER NOT NULL,
    url        TEXT NOT NULL,
    state      TEXT NOT NULL DEFAULT 'open'
               CHECK (state IN ('open', 'draft', 'merged', 'closed', 'gone')),
    changed_at REAL NOT NULL
);
CREATE TABLE review_rounds (
    round_id    INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    number      INTEGER NOT NULL,
    state       TEXT NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'asked', 'running', 'delivered', 'stopped')),
    reviewers   TEXT NOT NULL DEFAULT '[]',
    gate_id     INTEGER REFERENCES gates (gate_id),
    start_head  TEXT,
    head        TEXT,
    outcome     TEXT,
    uncapped    INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    UNIQUE (job_id, number)
);
CREATE UNIQUE INDEX review_rounds_one_queued ON review_rounds (job_id)
    WHERE state IN ('queued', 'asked');
CREATE UNIQUE INDEX review_rounds_one_running ON review_rounds (job_id) WHERE state = 'running';
CREATE TABLE review_points (
    round_id     INTEGER NOT NULL REFERENCES review_rounds (round_id),
    number       INTEGER NOT NULL,
    job_id       INTEGER NOT NULL REFERENCES jobs (job_id),
    source       TEXT NOT NULL,
    author       TEXT NOT NULL,
    body         TEXT NOT NULL,
    thread_id    TEXT,
    comment_id   INTEGER,
    path         TEXT,
    line         INTEGER,
    hunk         TEXT,
    outdated     INTEGER NOT NULL DEFAULT 0,
    action       TEXT CHECK (action IN ('change', 'answer', 'disagree')),
    reply        TEXT,
    replied_ref  TEXT,
    PRIMARY KEY (round_id, number),
    UNIQUE (job_id, source)
);
CREATE TABLE review_threads (
    job_id    INTEGER NOT NULL REFERENCES jobs (job_id),
    thread_id TEXT NOT NULL,
    handled   INTEGER NOT NULL,
    PRIMARY KEY (job_id, thread_id)
);
ALTER TABLE tasks ADD COLUMN allowance_usd REAL;
ALTER TABLE tasks ADD COLUMN merge_base TEXT;
"""

# What a delivery is about, when the edge can name it (`comment:ID`, `review:ID`): a second
# delivery of the same thing (a webhook and a catch-up read of the same comment, a runner's
# own event and the next run's reconciliation) is a redelivery. When the edge last read the
# outside world's state for a scope (a runner's repository), so the next read starts there.
DELIVERY_SUBJECTS = """
ALTER TABLE deliveries ADD COLUMN subject TEXT;
CREATE UNIQUE INDEX deliveries_subject ON deliveries (subject) WHERE subject IS NOT NULL;
CREATE TABLE read_marks (
    scope   TEXT PRIMARY KEY,
    read_at REAL NOT NULL
);
"""

# A job's mark (a digest of its key, the same in every state directory for the same job):
# the engine's commits on its branches carry it as a `TeaParty-Job:` trailer, so a new job
# continues a branch already on the source only when it can prove the branch is its own.
JOB_MARKS = """
ALTER TABLE job_workspaces ADD COLUMN mark TEXT;
"""

# An answer given on the decider's behalf by whoever ran the job (`teaparty run --yes`) is
# no decision of theirs: `answered_via` says `auto`, and the proxy neither learns from it
# nor measures itself against it. Such answers stored before have `answered_by` ending in
# " (--yes)", as `teaparty run` has written since it had `--yes`: they are told apart here,
# and what the proxy took from them is forgotten (its settled comparison with them).
GATE_ANSWERS_ON_BEHALF = """
CREATE TABLE gates_new (
    gate_id         INTEGER PRIMARY KEY,
    job_id          INTEGER REFERENCES jobs (job_id),
    conversation_id TEXT NOT NULL REFERENCES conversations (conversation_id),
    call_id         TEXT NOT NULL,
    kind            TEXT NOT NULL
                    CHECK (kind IN ('intent', 'plan', 'question', 'budget', 'merge-conflict',
                                    'protected-path', 'escalation', 'pull_request')),
    question        TEXT NOT NULL,
    options         TEXT,
    asked_by        TEXT NOT NULL,
    decider         TEXT,
    comment_ref     TEXT,
    answer          TEXT,
    answered_by     TEXT,
    answered_via    TEXT CHECK (answered_via IN ('human', 'proxy', 'auto')),
    asked_at        REAL NOT NULL,
    answered_at     REAL,
    answer_ref      TEXT,
    content_hash    TEXT,
    hashed_at       REAL,
    closed_at       REAL,
    closed_idle_at  REAL,
    payload         TEXT,
    pinned          TEXT,
    UNIQUE (conversation_id, call_id)
);
INSERT INTO gates_new (gate_id, job_id, conversation_id, call_id, kind, question, options,
    asked_by, decider, comment_ref, answer, answered_by, answered_via, asked_at, answered_at,
    answer_ref, content_hash, hashed_at, closed_at, closed_idle_at, payload, pinned)
SELECT gate_id, job_id, conversation_id, call_id, kind, question, options,
    asked_by, decider, comment_ref, answer, answered_by,
    CASE WHEN answered_via = 'human' AND answered_by LIKE '% (--yes)' THEN 'auto'
         ELSE answered_via END,
    asked_at, answered_at, answer_ref, content_hash, hashed_at, closed_at, closed_idle_at,
    payload, pinned FROM gates;
DROP TABLE gates;
ALTER TABLE gates_new RENAME TO gates;
CREATE INDEX gates_open ON gates (job_id) WHERE answer IS NULL;
CREATE UNIQUE INDEX gates_by_answer_ref ON gates (answer_ref) WHERE answer_ref IS NOT NULL;
UPDATE proxy_decisions SET actual = NULL, agreed = NULL, decided_at = NULL
    WHERE alone = 0 AND gate_id IN (SELECT gate_id FROM gates WHERE answered_via = 'auto');
"""

# Gate kinds are the features' (core/gate_kinds.py, registered with the bus): the table no
# longer lists them, so a new kind needs no migration. SQLite rebuilds the table to drop a
# CHECK; every row, column, index and reference stays.
GATE_KINDS_OPEN = """
CREATE TABLE gates_new (
    gate_id         INTEGER PRIMARY KEY,
    job_id          INTEGER REFERENCES jobs (job_id),
    conversation_id TEXT NOT NULL REFERENCES conversations (conversation_id),
    call_id         TEXT NOT NULL,
    kind            TEXT NOT NULL,
    question        TEXT NOT NULL,
    options         TEXT,
    asked_by        TEXT NOT NULL,
    decider         TEXT,
    comment_ref     TEXT,
    answer          TEXT,
    answered_by     TEXT,
    answered_via    TEXT CHECK (answered_via IN ('human', 'proxy', 'auto')),
    asked_at        REAL NOT NULL,
    answered_at     REAL,
    answer_ref      TEXT,
    content_hash    TEXT,
    hashed_at       REAL,
    closed_at       REAL,
    closed_idle_at  REAL,
    payload         TEXT,
    pinned          TEXT,
    UNIQUE (conversation_id, call_id)
);
INSERT INTO gates_new (gate_id, job_id, conversation_id, call_id, kind, question, options,
    asked_by, decider, comment_ref, answer, answered_by, answered_via, asked_at, answered_at,
    answer_ref, content_hash, hashed_at, closed_at, closed_idle_at, payload, pinned)
SELECT gate_id, job_id, conversation_id, call_id, kind, question, options,
    asked_by, decider, comment_ref, answer, answered_by, answered_via, asked_at, answered_at,
    answer_ref, content_hash, hashed_at, closed_at, closed_idle_at, payload, pinned FROM gates;
DROP TABLE gates;
ALTER TABLE gates_new RENAME TO gates;
CREATE INDEX gates_open ON gates (job_id) WHERE answer IS NULL;
CREATE UNIQUE INDEX gates_by_answer_ref ON gates (answer_ref) WHERE answer_ref IS NOT NULL;
"""

# The project's checks the engine ran (jobs/checks.py): one row per commit checked for a
# task (`task` its number) or for the job branch (`task` NULL); `record` the result's JSON.
ENGINE_CHECKS = """
CREATE TABLE IF NOT EXISTS checks (
    check_id    INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    task        INTEGER,
    commit_sha  TEXT NOT NULL,
    status      TEXT NOT NULL CHECK (status IN ('passed', 'failed', 'not run')),
    record      TEXT NOT NULL,
    checked_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS checks_by_commit ON checks (job_id, commit_sha);
"""

NETWORK_REFUSALS = """
CREATE TABLE IF NOT EXISTS network_refusals (
    refusal_id  INTEGER PRIMARY KEY,
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    task        INTEGER,
    agent       TEXT NOT NULL,
    host        TEXT NOT NULL,
    port        INTEGER NOT NULL,
    why         TEXT NOT NULL CHECK (why IN ('host', 'port', 'address')),
    command     TEXT NOT NULL,
    count       INTEGER NOT NULL,
    first_at    REAL NOT NULL,
    last_at     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS network_refusals_by_job ON network_refusals (job_id, host);
"""

# Task learnings (orchestrator/memory/, jobs/learned.py). What each job's lead wrote, kept
# as the engine wrote it on the job branch (`job_learned`), and each file the engine wrote
# there with its blob id (`job_learning_files`; NULL: removed), which the protected-path
# check knows as the engine's own. The index of the learnings files at base commits, by
# blob id (read once each), searched by FTS5; and the ids a repository forgot.
TASK_LEARNINGS = """
CREATE TABLE IF NOT EXISTS job_learned (
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    entry_id    TEXT NOT NULL,
    text        TEXT NOT NULL,
    source      TEXT NOT NULL,
    seq         INTEGER NOT NULL,
    PRIMARY KEY (job_id, entry_id)
);
CREATE TABLE IF NOT EXISTS job_learning_files (
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    path        TEXT NOT NULL,
    blob        TEXT,
    PRIMARY KEY (job_id, path)
);
CREATE TABLE IF NOT EXISTS learning_blobs (
    blob        TEXT PRIMARY KEY,
    entries     INTEGER NOT NULL,
    indexed_at  REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS learnings (
    learning_id INTEGER PRIMARY KEY,
    blob        TEXT NOT NULL REFERENCES learning_blobs (blob),
    entry_id    TEXT NOT NULL,
    text        TEXT NOT NULL,
    source      TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS learnings_by_blob ON learnings (blob);
CREATE VIRTUAL TABLE IF NOT EXISTS learnings_fts USING fts5 (
    text, content = 'learnings', content_rowid = 'learning_id', tokenize = 'porter unicode61'
);
CREATE TABLE IF NOT EXISTS learnings_forgotten (
    repo         TEXT NOT NULL,
    entry_id     TEXT NOT NULL,
    forgotten_by TEXT NOT NULL,
    forgotten_at REAL NOT NULL,
    PRIMARY KEY (repo, entry_id)
);
"""

# CI on a job's change request (jobs/ci_rounds.py): per head commit, the automatic round it
# started, each check re-run, each found flaky, a failure held for a person, when the App
# first saw it resting and whether CI ran on it, and the notes the tracking comment shows; a
# restarted process neither repeats nor forgets one.
CI_FACTS = """
CREATE TABLE IF NOT EXISTS ci_facts (
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    head_sha    TEXT NOT NULL,
    kind        TEXT NOT NULL
                CHECK (kind IN ('round', 'rerun', 'flaky', 'held', 'note', 'seen', 'ran')),
    name        TEXT NOT NULL DEFAULT '',
    note        TEXT,
    at          REAL NOT NULL,
    PRIMARY KEY (job_id, head_sha, kind, name)
);
"""

# CI that completed on a draft's head is decided once the pull request is ready for review
# (bot/handlers/ci.py): `deferred` keeps that it did, so the resting job's first look decides.
CI_FACTS_DEFERRED = """
CREATE TABLE ci_facts_new (
    job_id      INTEGER NOT NULL REFERENCES jobs (job_id),
    head_sha    TEXT NOT NULL,
    kind        TEXT NOT NULL CHECK (
                    kind IN ('round', 'rerun', 'flaky', 'held', 'note', 'seen', 'ran', 'deferred')
                ),
    name        TEXT NOT NULL DEFAULT '',
    note        TEXT,
    at          REAL NOT NULL,
    PRIMARY KEY (job_id, head_sha, kind, name)
);
INSERT INTO ci_facts_new SELECT job_id, head_sha, kind, name, note, at FROM ci_facts;
DROP TABLE ci_facts;
ALTER TABLE ci_facts_new RENAME TO ci_facts;
"""

MIGRATIONS: tuple[str, ...] = (
    INITIAL,
    BOARD_AND_GATES,
    TEAMS,
    FORGE,
    JOB_REPOSITORIES,
    JOB_PROJECTS_AND_FAILURES,
    WAITS_AND_WORKSPACE_KEYS,
    GATE_ANSWER_REFS,
    GATE_CONTENT_HASHES,
    JOB_HOLDS_AND_STEERING,
    JOB_COMMANDS,
    GATES_CLOSED_IDLE,
    PREFERENCES_AND_JOB_BUDGETS,
    PROXY_DECISIONS,
    GATE_KINDS,
    JOB_TOKEN_BUDGETS,
    ISSUE_REVISIONS,
    REVIEW_ROUNDS,
    DELIVERY_SUBJECTS,
    JOB_MARKS,
    GATE_ANSWERS_ON_BEHALF,
    GATE_KINDS_OPEN,
    ENGINE_CHECKS,
    NETWORK_REFUSALS,
    TASK_LEARNINGS,
    CI_FACTS,
    CI_FACTS_DEFERRED,
)

SCHEMA_VERSION = len(MIGRATIONS)  # what a store this teaparty migrated has as user_version
