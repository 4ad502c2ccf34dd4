-- A daily roll-up of the usage ledger (issue 35): one row per account, UTC day, model and project
-- ('' for none), kept in the same transaction as the records it sums, so that `GET /v1/usage`
-- reads at most days × models × projects rows instead of every record in the range. Filled here
-- from the records already stored.
CREATE TABLE usage_daily (
    user_id     TEXT    NOT NULL,
    day         INTEGER NOT NULL,
    model       TEXT    NOT NULL,
    project     TEXT    NOT NULL,
    legs        INTEGER NOT NULL,
    input       INTEGER NOT NULL,
    cached      INTEGER NOT NULL,
    cache_write INTEGER NOT NULL,
    output      INTEGER NOT NULL,
    cost        REAL,
    PRIMARY KEY (user_id, day, model, project)
);
CREATE INDEX usage_daily_day ON usage_daily (day);

INSERT INTO usage_daily (user_id, day, model, project, legs, input, cached, cache_write, output, cost)
SELECT user_id, day, model, COALESCE(project_id, ''), COUNT(*), SUM(input_tokens),
    SUM(cached_input_tokens), SUM(cache_write_tokens), SUM(output_tokens), SUM(cost_usd)
FROM usage_legs
GROUP BY user_id, day, model, COALESCE(project_id, '');
