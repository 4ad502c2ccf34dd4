-- Accounts, sessions (only the SHA-256 of each token) and the waitlist.
-- Times are Unix seconds with a fraction, as in the SQLite backend, so both report the same values.
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    -- Byte-wise, as in SQLite, so `relay users list` orders alike on both backends.
    email         TEXT COLLATE "C" NOT NULL UNIQUE,
    password_hash TEXT NOT NULL,
    role          TEXT NOT NULL CHECK (role IN ('user', 'admin')),
    quota_limit   BIGINT NOT NULL,
    used          BIGINT NOT NULL DEFAULT 0,
    created_at    DOUBLE PRECISION NOT NULL
);

-- Every instance reads sessions from here on every request, so a signout through one instance is
-- seen by all of them at once.
CREATE TABLE sessions (
    token_hash TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX sessions_by_user ON sessions(user_id);

CREATE TABLE waitlist (
    email      TEXT PRIMARY KEY,
    source     TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL
);
