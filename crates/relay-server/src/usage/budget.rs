//! Monthly token budgets: input plus output tokens per account and calendar month (UTC), counted
//! in the store when a leg's record is written, read from the store before a leg is admitted.
//!
//! Exact across instances sharing a store: a leg reserves its prompt estimate and its output cap
//! before it runs (`reserve`), its output is clamped to what is left, and its record settles the
//! reservation in the transaction that counts its tokens, so concurrent legs cannot together pass
//! the budget (issue 38).

use relay_wire::ErrorCode;

use crate::error::{ApiError, ApiResult};
use crate::store::usage::{Reservation, UsageStore, month_of};

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
    let budget = of(store, default_budget, user_id).await?;
    if budget.exhausted() {
        return Err(exhausted(budget.token_budget, budget.tokens_used));
    }
    Ok(())
}

/// How long a reservation counts at most: past it, the leg holding it is taken to have died
/// without a record (a crash) and its tokens are free again.
pub const RESERVATION_TTL_SECS: i64 = 3600;

/// A leg's hold on its account's monthly budget: the tokens reserved (prompt estimate plus the
/// output it may produce) and the output cap the call is clamped to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub reservation: Reservation,
    pub output_cap: u32,
}

/// Admission under a token budget: refuses a call whose prompt estimate no longer fits what is
/// left (the month's tokens and every live reservation counted), else reserves the prompt and
/// the output it may produce, the output clamped to what is left. `None`: nothing to hold (open
/// mode, or an unlimited account). Exact across instances: the store decides each reservation
/// atomically; one that lost a race is retried with a fresh read.
pub async fn reserve(
    store: &dyn UsageStore,
    default_budget: Option<i64>,
    user_id: Option<&str>,
    prompt_estimate: u64,
    requested_output: Option<u32>,
) -> ApiResult<Option<Hold>> {
    let (Some(user_id), Some(default)) = (user_id, default_budget) else {
        return Ok(None);
    };
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = crate::clock::now() as i64;
    let month = month_of(now);
    let prompt = i64::try_from(prompt_estimate).unwrap_or(i64::MAX);
    for _ in 0..3 {
        let state = store.month_state(user_id, month, now).await?;
        let budget = state.own_budget.unwrap_or(default);
        if budget < 0 {
            return Ok(None);
        }
        let remaining = budget
            .saturating_sub(state.used)
            .saturating_sub(state.reserved);
        if state.used >= budget {
            return Err(exhausted(budget, state.used));
        }
        if remaining <= prompt {
            return Err(ApiError::new(
                ErrorCode::BudgetExceeded,
                format!(
                    "this call's prompt (about {prompt} tokens) does not fit the {} tokens left of the account's monthly token budget{}",
                    remaining.max(0),
                    if state.reserved > 0 {
                        " while other calls are running"
                    } else {
                        ""
                    }
                ),
            ));
        }
        let output = i64::from(requested_output.unwrap_or(u32::MAX))
            .min(remaining - prompt)
            .min(i64::from(u32::MAX));
        let reservation = Reservation {
            id: format!("{:032x}", rand::random::<u128>()),
            user_id: user_id.to_owned(),
            month,
            tokens: prompt.saturating_add(output),
            expires_at: now + RESERVATION_TTL_SECS,
        };
        if store.reserve(&reservation, budget, now).await? {
            return Ok(Some(Hold {
                output_cap: u32::try_from(output).unwrap_or(u32::MAX),
                reservation,
            }));
        }
    }
    Err(ApiError::new(
        ErrorCode::BudgetExceeded,
        "the account's monthly token budget is held by calls still running; retry when they end",
    ))
}

/// The refusal of a used-up budget: the budget, the figure and when it resets (issue 42).
fn exhausted(budget: i64, used: i64) -> ApiError {
    let resets =
        super::period::rfc3339(super::period::next_month_start(crate::clock::now() as i64));
    ApiError::new(
        ErrorCode::BudgetExceeded,
        format!(
            "the account's monthly token budget of {budget} tokens is used up ({used} used this month); it resets at {resets}; ask an operator to raise it"
        ),
    )
}
