-- Issue 38. Budget reservations: a leg admitted under a monthly token budget holds its prompt
-- estimate plus its output cap here until its usage record is written (which deletes the row in
-- the same transaction), so concurrent legs cannot together pass the budget. A row whose leg
-- never ended (a crash) stops counting at `expires_at`.
CREATE TABLE usage_reservations (
    id         TEXT    PRIMARY KEY,
    user_id    TEXT    NOT NULL,
    month      BIGINT NOT NULL,
    tokens     BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX usage_reservations_user ON usage_reservations (user_id, month);

-- Values Relay generates once and every instance shares (the identity key providers see).
CREATE TABLE relay_settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

-- A record whose tokens are Relay's estimate: the provider's own count never arrived (the
-- client left and the provider's stream ended before its usage, or the call failed after output).
ALTER TABLE usage_legs ADD COLUMN estimated BOOLEAN NOT NULL DEFAULT FALSE;

-- Tools the provider ran itself for the leg (web searches, fetches, code runs: Anthropic's
-- `usage.server_tool_use`, a Responses answer's hosted `*_call` items), billed apart from tokens.
ALTER TABLE usage_legs ADD COLUMN server_tool_uses BIGINT NOT NULL DEFAULT 0;
