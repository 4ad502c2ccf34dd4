-- The usage ledger (issue 35): one row per leg that took a quota unit. `day` (days since
-- 1970-01-01, UTC) is stored beside `at` so that the per-day aggregates group on an indexed
-- integer. Token budgets count per account and calendar month in `usage_months`, which erasure
-- of the records leaves alone (the month's count stays).
CREATE TABLE usage_legs (
    id                  INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id             TEXT    NOT NULL,
    request_id          TEXT    NOT NULL,
    at                  INTEGER NOT NULL,
    day                 INTEGER NOT NULL,
    route               TEXT    NOT NULL,
    model               TEXT    NOT NULL,
    provider            TEXT    NOT NULL,
    project_id          TEXT,
    status              TEXT    NOT NULL,
    input_tokens        INTEGER NOT NULL,
    cached_input_tokens INTEGER NOT NULL,
    cache_write_tokens  INTEGER NOT NULL,
    output_tokens       INTEGER NOT NULL,
    reasoning_tokens    INTEGER NOT NULL,
    ttfb_ms             INTEGER NOT NULL,
    duration_ms         INTEGER NOT NULL,
    cost_usd            REAL
);
CREATE INDEX usage_legs_user_day ON usage_legs (user_id, day);
CREATE INDEX usage_legs_day ON usage_legs (day);

CREATE TABLE usage_months (
    user_id TEXT    NOT NULL,
    month   INTEGER NOT NULL,
    tokens  INTEGER NOT NULL,
    PRIMARY KEY (user_id, month)
);

-- Per-account monthly token budgets (input plus output tokens); an account without a row follows
-- `[auth] default_token_budget`. Kept beside the month counts so one read decides a leg.
CREATE TABLE usage_budgets (
    user_id      TEXT   PRIMARY KEY,
    token_budget INTEGER NOT NULL
);
