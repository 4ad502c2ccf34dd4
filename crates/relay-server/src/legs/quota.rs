//! A leg's quota: the unit an account's leg takes before it runs (or the open-mode leg counted
//! once a model answers), and the unit given back when no model produced output.

use std::sync::Arc;

use super::Legs;
use crate::accounts::Caller;
use crate::error::{ApiError, ApiResult};
use crate::store::{Admission, AuthStore, MemoryStore};

/// The quota unit a leg holds, given back if no model produces output.
pub enum Quota {
    Taken {
        auth: Arc<dyn AuthStore>,
        user_id: String,
    },
    /// Open mode: nothing is limited, served legs are counted for `/v1/me`.
    OpenMode(Arc<dyn MemoryStore>),
}

/// The refusal of an account whose quota is used up: its limit, period and reset (issue 42).
pub(super) fn exceeded(legs: &Legs, user: &crate::store::User) -> ApiError {
    legs.deps()
        .quota_month
        .exceeded(user.effective_limit(), legs.deps().clock.now())
}

impl Quota {
    /// Takes one unit of the caller's quota; `quota_exceeded` when none is left.
    pub async fn admit(legs: &Legs, caller: &Caller) -> ApiResult<Self> {
        match caller {
            Caller::User(user) => {
                let auth = legs
                    .deps()
                    .auth
                    .as_ref()
                    .ok_or_else(|| ApiError::internal("account without an auth store"))?;
                legs.roll_quota().await?;
                if auth.admit_leg(&user.id).await? == Admission::QuotaExceeded {
                    legs.metrics().quota_refusals.inc();
                    return Err(exceeded(legs, user));
                }
                Ok(Self::Taken {
                    auth: auth.clone(),
                    user_id: user.id.clone(),
                })
            }
            Caller::Local => Ok(Self::OpenMode(legs.deps().memory.clone())),
        }
    }

    /// Gives the unit back: no model produced output, so the leg cost nothing.
    pub async fn refund(&self) {
        if let Self::Taken { auth, user_id } = self
            && let Err(e) = auth.refund_leg(user_id).await
        {
            tracing::error!(error = %e, "could not give back a quota unit");
        }
    }

    /// A model answered: an open-mode leg is counted now.
    pub async fn served(&self) {
        if let Self::OpenMode(memory) = self
            && let Err(e) = memory.count_open_leg().await
        {
            tracing::warn!(error = %e, "could not count an open-mode leg");
        }
    }
}
