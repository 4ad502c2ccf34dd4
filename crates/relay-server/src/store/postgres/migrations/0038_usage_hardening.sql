-- Erasure that covers legs in flight (issue 38): one row per account whose usage was erased, with
-- the time in Unix milliseconds. A record written later for a leg that started at or before that
-- time is dropped (`counters` true, the account was deleted: its month's count goes too), so a leg
-- that was running while its account was deleted, or while `DELETE /v1/memory/all` ran, leaves
-- nothing behind. Kept as long as the records' retention.
CREATE TABLE usage_erasures (
    user_id   TEXT    PRIMARY KEY,
    erased_at BIGINT  NOT NULL,
    counters  BOOLEAN NOT NULL
);
