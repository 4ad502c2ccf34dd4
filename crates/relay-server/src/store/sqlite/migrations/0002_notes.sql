-- Project memory. `seq` counts per (user, project) from 1 and is never reused: the counter row
-- outlives deletes of notes (only the GDPR cascade removes it with everything else of the user).
CREATE TABLE notes (
    pk         INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL UNIQUE,
    user_id    TEXT NOT NULL,
    project_id TEXT NOT NULL,
    seq        INTEGER NOT NULL,
    note       TEXT NOT NULL,
    norm_hash  TEXT NOT NULL,
    author     TEXT NOT NULL,
    mem_type   TEXT NOT NULL,
    created_at REAL NOT NULL,
    UNIQUE (user_id, project_id, seq)
);
CREATE INDEX notes_by_user_created ON notes(user_id, created_at, id);
CREATE INDEX notes_by_project_created ON notes(user_id, project_id, created_at, id);
CREATE INDEX notes_by_norm ON notes(user_id, project_id, norm_hash);

CREATE TABLE note_counters (
    user_id    TEXT NOT NULL,
    project_id TEXT NOT NULL,
    last_seq   INTEGER NOT NULL,
    PRIMARY KEY (user_id, project_id)
);

-- Full-text index for relevance (bm25), one row per note with rowid = notes.pk, written in the same
-- transaction as the note on every path. `scope` is one token naming the (user, project), so a
-- search reads only that project's postings.
CREATE VIRTUAL TABLE notes_fts USING fts5(note, scope, tokenize = 'porter unicode61');

-- Legs served in open mode, for GET /v1/me (one row).
CREATE TABLE open_usage (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    used INTEGER NOT NULL
);
INSERT INTO open_usage (id, used) VALUES (1, 0);
