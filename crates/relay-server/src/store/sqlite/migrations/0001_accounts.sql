-- Accounts, sessions (only the SHA-256 of each token) and the waitlist.
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    email         TEXT NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('user', 'admin')),
    quota_limit   INTEGER NOT NULL,
    used          INTEGER NOT NULL DEFAULT 0,
    created_at    REAL NOT NULL
);

CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE INDEX sessions_by_user ON sessions(user_id);

CREATE TABLE waitlist (
    email      TEXT PRIMARY KEY,
    source     TEXT NOT NULL,
    created_at REAL NOT NULL
);
