//! Monthly budgets per account and calendar month (UTC): tokens (input plus output) and spend
//! (the ledger's `cost_usd`), counted in the store when a leg's record is written, read from the
//! store before a leg is admitted.
//!
//! Exact across instances sharing a store: a leg reserves its prompt estimate and its output cap
//! before it runs (`reserve`), its output is clamped to what is left, and its record settles the
//! reservation in the transaction that counts its tokens, so concurrent legs cannot together pass
//! the budget (issue 38).

use relay_wire::ErrorCode;

use super::Prices;
use crate::error::{ApiError, ApiResult};
use crate::store::usage::{Budgets, MonthState, Reservation, UsageStore, month_of};

/// The budgets of an account without its own (`[auth] default_token_budget`,
/// `default_spend_budget_usd`), each below 0 when unlimited.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Defaults {
    pub tokens: i64,
    pub spend_usd: f64,
}

impl Defaults {
    /// `[auth]`'s default budgets.
    pub fn of(auth: &crate::config::AuthConfig) -> Self {
        Self {
            tokens: auth.default_token_budget,
            spend_usd: auth.default_spend_budget_usd,
        }
    }
}

/// An account's budgets this month: each budget (below 0 unlimited) and what was used.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub token_budget: i64,
    pub tokens_used: i64,
    pub spend_budget_usd: f64,
    pub spend_used_usd: f64,
}

impl Budget {
    /// No budget at all: open mode's `local`.
    pub const UNLIMITED: Self = Self {
        token_budget: -1,
        tokens_used: 0,
        spend_budget_usd: -1.0,
        spend_used_usd: 0.0,
    };

    /// The budgets that apply to an account in `state`, given the defaults.
    pub fn from_state(state: &MonthState, defaults: Defaults) -> Self {
        Self {
            token_budget: state.own_budget.unwrap_or(defaults.tokens),
            tokens_used: state.used,
            spend_budget_usd: normal_usd(state.own_spend_budget.unwrap_or(defaults.spend_usd)),
            spend_used_usd: state.spent,
        }
    }

    /// Tokens left; never below 0; -1 when unlimited.
    pub fn remaining(&self) -> i64 {
        if self.token_budget < 0 {
            -1
        } else {
            (self.token_budget - self.tokens_used).max(0)
        }
    }

    pub fn tokens_exhausted(&self) -> bool {
        self.token_budget >= 0 && self.tokens_used >= self.token_budget
    }

    pub fn spend_exhausted(&self) -> bool {
        self.spend_budget_usd >= 0.0 && self.spend_used_usd >= self.spend_budget_usd
    }

    pub fn exhausted(&self) -> bool {
        self.tokens_exhausted() || self.spend_exhausted()
    }
}

/// A spend budget as Relay keeps it: any negative figure is "unlimited" (-1).
fn normal_usd(usd: f64) -> f64 {
    if usd < 0.0 || !usd.is_finite() {
        -1.0
    } else {
        usd
    }
}

/// The account's budgets and this month's use. `defaults` is `None` in open mode (`local` is
/// unlimited).
pub async fn of(
    store: &dyn UsageStore,
    defaults: Option<Defaults>,
    user_id: &str,
) -> ApiResult<Budget> {
    let Some(defaults) = defaults else {
        return Ok(Budget::UNLIMITED);
    };
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = crate::clock::now() as i64;
    let state = store.month_state(user_id, month_of(now), now).await?;
    Ok(Budget::from_state(&state, defaults))
}

/// Refuses a leg of an account whose budget is used up: before any provider call, taking no unit.
pub async fn check(
    store: &dyn UsageStore,
    defaults: Option<Defaults>,
    user_id: Option<&str>,
) -> ApiResult<()> {
    // Open mode's `local` has no budget.
    let Some(user_id) = user_id else {
        return Ok(());
    };
    let budget = of(store, defaults, user_id).await?;
    refuse_exhausted(&budget)
}

/// The refusal of a budget that is used up, if one is.
fn refuse_exhausted(budget: &Budget) -> ApiResult<()> {
    if budget.tokens_exhausted() {
        return Err(exhausted(budget.token_budget, budget.tokens_used));
    }
    if budget.spend_exhausted() {
        return Err(spend_exhausted(
            budget.spend_budget_usd,
            budget.spend_used_usd,
        ));
    }
    Ok(())
}

/// How long a reservation counts at most: past it, the leg holding it is taken to have died
/// without a record (a crash) and its tokens are free again.
pub const RESERVATION_TTL_SECS: i64 = 3600;

/// A leg's hold on its account's monthly budgets: the tokens (and USD) reserved (prompt estimate
/// plus the output it may produce) and the output cap the call is clamped to.
#[derive(Debug, Clone, PartialEq)]
pub struct Hold {
    pub reservation: Reservation,
    pub output_cap: u32,
}

/// What admission under the budgets gave a leg: its hold (none for an unlimited account) and
/// the account's standing as read before the leg (for the usage-limit headers).
#[derive(Debug, Clone, PartialEq)]
pub struct Admitted {
    pub hold: Option<Hold>,
    pub budget: Budget,
}

/// Admission under the monthly budgets: refuses a call whose prompt estimate no longer fits what
/// is left (the month's use and every live reservation counted), else reserves the prompt and
/// the output it may produce, the output clamped to what is left of tokens and (priced by
/// `prices`, the dearest of the models that may answer) of spend. Exact across instances: the
/// store decides each reservation atomically; one that lost a race is retried with a fresh read.
pub async fn reserve(
    store: &dyn UsageStore,
    defaults: Option<Defaults>,
    user_id: Option<&str>,
    prompt_estimate: u64,
    requested_output: Option<u32>,
    prices: Option<&Prices>,
) -> ApiResult<Admitted> {
    let (Some(user_id), Some(defaults)) = (user_id, defaults) else {
        return Ok(Admitted {
            hold: None,
            budget: Budget::UNLIMITED,
        });
    };
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = crate::clock::now() as i64;
    let month = month_of(now);
    let prompt = i64::try_from(prompt_estimate).unwrap_or(i64::MAX);
    for _ in 0..3 {
        let state = store.month_state(user_id, month, now).await?;
        let budget = Budget::from_state(&state, defaults);
        if budget.token_budget < 0 && budget.spend_budget_usd < 0.0 {
            return Ok(Admitted { hold: None, budget });
        }
        refuse_exhausted(&budget)?;
        let mut output = i64::from(requested_output.unwrap_or(u32::MAX));
        if budget.token_budget >= 0 {
            let remaining = budget
                .token_budget
                .saturating_sub(state.used)
                .saturating_sub(state.reserved);
            if remaining <= prompt {
                return Err(ApiError::new(
                    ErrorCode::BudgetExceeded,
                    format!(
                        "this call's prompt (about {prompt} tokens) does not fit the {} tokens left of the account's monthly token budget{}; it resets at {}",
                        remaining.max(0),
                        while_running(state.reserved > 0),
                        resets_at()
                    ),
                ));
            }
            output = output.min(remaining - prompt);
        }
        let mut cost_usd = 0.0;
        if budget.spend_budget_usd >= 0.0
            && let Some(prices) = prices
        {
            let left = budget.spend_budget_usd - state.spent - state.reserved_usd;
            let prompt_cost = prices.cost(prompt, 0, 0, 0);
            if left <= prompt_cost {
                return Err(ApiError::new(
                    ErrorCode::BudgetExceeded,
                    format!(
                        "this call's prompt (about {}) does not fit the {} left of the account's monthly spend budget{}; it resets at {}",
                        usd(prompt_cost),
                        usd(left.max(0.0)),
                        while_running(state.reserved_usd > 0.0),
                        resets_at()
                    ),
                ));
            }
            if prices.output > 0.0 {
                #[allow(
                    clippy::cast_possible_truncation,
                    reason = "clamped to u32 below; a float past i64 saturates"
                )]
                let affordable =
                    ((left - prompt_cost) * 1_000_000.0 / prices.output).floor() as i64;
                output = output.min(affordable.max(0));
            }
            cost_usd = prices.cost(prompt, 0, 0, output.min(i64::from(u32::MAX)));
        }
        let output = output.clamp(0, i64::from(u32::MAX));
        let reservation = Reservation {
            id: format!("{:032x}", rand::random::<u128>()),
            user_id: user_id.to_owned(),
            month,
            tokens: prompt.saturating_add(output),
            cost_usd,
            expires_at: now + RESERVATION_TTL_SECS,
        };
        let budgets = Budgets {
            tokens: budget.token_budget,
            spend_usd: if prices.is_some() {
                budget.spend_budget_usd
            } else {
                -1.0
            },
        };
        if store.reserve(&reservation, budgets, now).await? {
            return Ok(Admitted {
                hold: Some(Hold {
                    output_cap: u32::try_from(output).unwrap_or(u32::MAX),
                    reservation,
                }),
                budget,
            });
        }
    }
    Err(ApiError::new(
        ErrorCode::BudgetExceeded,
        "the account's monthly budget is held by calls still running; retry when they end",
    ))
}

/// When the monthly budgets next reset (the next UTC month's start), for a refusal.
fn resets_at() -> String {
    #[allow(clippy::cast_possible_truncation, reason = "Unix seconds fit i64")]
    let now = crate::clock::now() as i64;
    super::period::rfc3339(super::period::next_month_start(now))
}

/// An amount for a message: cents, or down to a millionth of a dollar below a cent.
fn usd(amount: f64) -> String {
    if amount >= 0.01 {
        format!("${amount:.2}")
    } else {
        format!("${amount:.6}")
    }
}

fn while_running(others: bool) -> &'static str {
    if others {
        " while other calls are running"
    } else {
        ""
    }
}

/// The refusal of a used-up budget: the budget, the figure and when it resets (issue 42).
fn exhausted(budget: i64, used: i64) -> ApiError {
    let resets = resets_at();
    ApiError::new(
        ErrorCode::BudgetExceeded,
        format!(
            "the account's monthly token budget of {budget} tokens is used up ({used} used this month); it resets at {resets}; ask an operator to raise it"
        ),
    )
}

/// The refusal of a used-up spend budget: the budget, the figure and when it resets.
fn spend_exhausted(budget: f64, used: f64) -> ApiError {
    let resets = resets_at();
    ApiError::new(
        ErrorCode::BudgetExceeded,
        format!(
            "the account's monthly spend budget of {} is used up ({} spent this month); it resets at {resets}; ask an operator to raise it",
            usd(budget),
            usd(used)
        ),
    )
}
