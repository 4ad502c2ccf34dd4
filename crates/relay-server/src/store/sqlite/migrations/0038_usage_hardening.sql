-- Erasure that covers legs in flight (issue 38): one row per account whose usage was erased, with
-- the time in Unix milliseconds. A record written later for a leg that started at or before that
-- time is dropped (`counters` true, the account was deleted: its month's count goes too), so a leg
-- that was running while its account was deleted, or while `DELETE /v1/memory/all` ran, leaves
-- nothing behind. Kept as long as the records' retention.
CREATE TABLE usage_erasures (
    user_id   TEXT    PRIMARY KEY,
    erased_at INTEGER NOT NULL,
    counters  INTEGER NOT NULL
);

-- Before issue 38 a sum that passed 2^63 turned into a float in SQLite (which the reads refused);
-- such a value is held at the largest integer instead, so nothing already stored is lost.
UPDATE usage_months SET tokens = CAST(tokens AS INTEGER) WHERE typeof(tokens) = 'real';
UPDATE usage_daily SET
    input = CAST(input AS INTEGER),
    cached = CAST(cached AS INTEGER),
    cache_write = CAST(cache_write AS INTEGER),
    output = CAST(output AS INTEGER)
WHERE 'real' IN (typeof(input), typeof(cached), typeof(cache_write), typeof(output));
