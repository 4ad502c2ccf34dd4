//! Monthly token budgets: input plus output tokens per account and calendar month (UTC), counted
//! in the store when a leg's record is written, read from the store before a leg is admitted.
//!
//! Exact across instances sharing a store: every instance reads the same month row. A leg admitted
//! under the budget may finish past it; legs in flight (and records not yet written, at most one
//! batch) are the only overshoot.

use relay_wire::ErrorCode;

use crate::error::{ApiError, ApiResult};
use crate::store::usage::{UsageStore, month_of};

/// An account's budget this month: the budget (-1 unlimited) and the tokens used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub token_budget: i64,
    pub tokens_used: i64,
}

impl Budget {
    /// Never below 0; -1 when unlimited.
    pub fn remaining(&self) -> i64 {
        if self.token_budget < 0 {
            -1
        } else {
            (self.token_budget - self.tokens_used).max(0)
        }
    }

    pub fn exhausted(&self) -> bool {
        self.token_budget >= 0 && self.tokens_used >= self.token_budget
    }
}

/// The account's budget and this month's tokens. `default_budget` is `[auth]
/// default_token_budget`, `None` in open mode (`local` is unlimited).
pub async fn of(
    store: &dyn UsageStore,
    default_budget: Option<i64>,
    user_id: &str,
) -> ApiResult<Budget> {
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let month = month_of(crate::clock::now() as i64);
    let (own, tokens_used) = store.budget_and_month(user_id, month).await?;
    let token_budget = match default_budget {
        Some(default) => own.unwrap_or(default),
        None => -1,
    };
    Ok(Budget {
        token_budget,
        tokens_used,
    })
}

/// Refuses a leg of an account whose budget is used up: before any provider call, taking no unit.
pub async fn check(
    store: &dyn UsageStore,
    default_budget: Option<i64>,
    user_id: Option<&str>,
) -> ApiResult<()> {
    // Open mode's `local` has no budget.
    let Some(user_id) = user_id else {
        return Ok(());
    };
    if of(store, default_budget, user_id).await?.exhausted() {
        return Err(ApiError::new(
            ErrorCode::BudgetExceeded,
            "the account's monthly token budget is used up; ask an operator to raise it",
        ));
    }
    Ok(())
}
