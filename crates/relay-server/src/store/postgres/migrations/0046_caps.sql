-- Issue 40: caps an operator sets per account beside the unit quota and the token budget.
--
-- Which configured models an account may use: a JSON array of model names, NULL for all.
ALTER TABLE users ADD COLUMN allowed_models TEXT;

-- A monthly spend budget in USD per account (-1 unlimited); an account without a row follows
-- `[auth] default_spend_budget_usd`.
CREATE TABLE usage_spend_budgets (
    user_id          TEXT PRIMARY KEY,
    spend_budget_usd DOUBLE PRECISION NOT NULL
);

-- The month's spend, counted with its tokens when a record is written (the ledger's `cost_usd`),
-- and what each reservation holds of it while its leg runs.
ALTER TABLE usage_months ADD COLUMN cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0;
ALTER TABLE usage_reservations ADD COLUMN cost_usd DOUBLE PRECISION NOT NULL DEFAULT 0;

-- The months counted before this upgrade get their spend from the records still kept.
UPDATE usage_months SET cost_usd = COALESCE((
    SELECT SUM(l.cost_usd) FROM usage_legs l
    WHERE l.user_id = usage_months.user_id
      AND CAST(to_char(to_timestamp(l.at) AT TIME ZONE 'UTC', 'YYYYMM') AS BIGINT) = usage_months.month), 0);
