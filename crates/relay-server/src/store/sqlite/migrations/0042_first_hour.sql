-- Issue 42: the unit quota counts a calendar month, and an operator can lift a sign-in lock.
--
-- `used_month` is the month (YYYYMM, UTC) `used` counts. What accounts used before this upgrade
-- counts as this month's; with `[auth] quota_period = "month"` the first admission of a later
-- month sets every older count back to 0 (`usage::period`).
ALTER TABLE users ADD COLUMN used_month INTEGER;
UPDATE users SET used_month = CAST(strftime('%Y%m', 'now') AS INTEGER);

-- When an operator last lifted this account's sign-in lock (`relay users unlock`, the admin
-- API): failures before it no longer count, on every instance.
ALTER TABLE users ADD COLUMN signin_unlocked_at REAL;
