-- Issue 40: agents sign in (the OAuth device flow), refresh tokens, API keys.
--
-- Device codes: only the SHA-256 of the device code is kept; the user code is what a person types
-- on /device. `status` moves pending -> approved | denied, and approved -> used when the token is
-- handed out, so a code gives one token pair at most.
CREATE TABLE device_codes (
    code_hash    TEXT PRIMARY KEY,
    user_code    TEXT NOT NULL UNIQUE,
    surface      TEXT NOT NULL,
    user_agent   TEXT NOT NULL,
    status       TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'used')),
    user_id      TEXT REFERENCES users(id) ON DELETE CASCADE,
    created_at   REAL NOT NULL,
    expires_at   REAL NOT NULL,
    last_poll_at REAL
);

-- A sign-in's access tokens are sessions rows; `family` ties them to the refresh tokens of the
-- same sign-in, so a reused refresh token ends them all. An API key is a sessions row too, with
-- `key_id` naming its api_keys row: it is looked up, cached and evicted as any token is.
ALTER TABLE sessions ADD COLUMN family TEXT;
ALTER TABLE sessions ADD COLUMN key_id TEXT;
CREATE INDEX sessions_by_family ON sessions(family);

CREATE TABLE refresh_tokens (
    token_hash TEXT PRIMARY KEY,
    family     TEXT NOT NULL,
    user_id    TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    -- Set when the token is exchanged; a second exchange revokes the family.
    used_at    REAL
);
CREATE INDEX refresh_tokens_by_family ON refresh_tokens(family);
CREATE INDEX refresh_tokens_by_user ON refresh_tokens(user_id);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    name         TEXT NOT NULL,
    prefix       TEXT NOT NULL,
    created_at   REAL NOT NULL,
    expires_at   REAL,
    last_used_at REAL
);
CREATE INDEX api_keys_by_user ON api_keys(user_id);

-- Managed settings for agents (Claude Code's managed-settings.json), served at /managed/settings:
-- one document for everyone (scope '*') and optionally one per account (scope = its id), which
-- replaces the shared one for that account. `settings` is the canonical JSON (keys sorted, no
-- whitespace) whose SHA-256 is the checksum; `uuid` names the policy and stays across edits.
CREATE TABLE agent_settings (
    scope      TEXT PRIMARY KEY,
    user_id    TEXT REFERENCES users(id) ON DELETE CASCADE,
    uuid       TEXT NOT NULL,
    settings   TEXT NOT NULL,
    updated_at REAL NOT NULL
);
