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

MIGRATIONS: tuple[str, ...] = (INITIAL,)
