//! Operator commands (`relay users …`) and start-up checks, kept in the library so the binary stays
//! a thin CLI and tests can drive the same code.

use std::io::BufRead;

use crate::config::{Config, redact_url};
use crate::domain::{Email, Password, Role};
use crate::store::{AuthStore, MemoryStore, NewUser, StoreError, Stores, User, UserChanges};

/// The one-line start-up summary: bind, stores (credentials redacted), auth mode, providers.
pub fn startup_summary(config: &Config, bound: std::net::SocketAddr, providers: &str) -> String {
    let auth = match &config.auth {
        Some(a) => format!(
            "accounts (signup {}, store {})",
            match a.signup {
                crate::config::SignupMode::Open => "open",
                crate::config::SignupMode::Closed => "closed",
            },
            redact_url(&a.url)
        ),
        None => {
            "OPEN MODE (no [auth] table: every endpoint is open, the caller is `local`)".to_owned()
        }
    };
    format!(
        "relay listening on {} | memory store {} | auth: {} | providers: {}",
        bound,
        redact_url(&config.memory.url),
        auth,
        providers
    )
}

/// Where a person finds the console, the reference and the health check, printed at start-up:
/// `[server] public_url` when set, else the bound address (loopback for an unspecified one).
pub fn addresses(config: &Config, bound: std::net::SocketAddr) -> String {
    let base = match &config.server.public_url {
        Some(url) => url.trim_end_matches('/').to_owned(),
        None => {
            let mut shown = bound;
            if shown.ip().is_unspecified() {
                shown.set_ip(std::net::Ipv4Addr::LOCALHOST.into());
            }
            format!("http://{shown}")
        }
    };
    format!("console {base}/console | reference {base}/docs | health {base}/healthz")
}

/// In open mode anybody who can reach the port is `local`: refuse a non-loopback bind unless told.
pub fn check_open_bind(config: &Config, allow_open: bool) -> anyhow::Result<()> {
    if config.open_mode() && !config.bind.ip().is_loopback() && !allow_open {
        anyhow::bail!(
            "refusing to listen on {} in open mode: anyone who can reach it gets full access. \
             Add an [auth] table to the configuration, bind to 127.0.0.1, or pass --allow-open",
            config.bind
        );
    }
    Ok(())
}

/// Operator failures, shown to the operator as they are.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error(
        "no auth store is configured: add an [auth] table (or RELAY_AUTH_URL) to manage accounts"
    )]
    NoAuth,
    #[error("{0}")]
    Invalid(String),
    #[error("no account with email {0}")]
    NoSuchUser(String),
    #[error("an account with email {0} already exists")]
    Exists(String),
    /// The change would leave no admin (the last admin demoting or deleting themselves).
    #[error(
        "{0} is the last admin: make another account admin first, so that someone can still manage accounts"
    )]
    LastAdmin(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

pub struct Users {
    stores: Stores,
    config: Config,
}

impl Users {
    pub async fn open(config: Config) -> Result<Self, OperatorError> {
        if config.open_mode() {
            return Err(OperatorError::NoAuth);
        }
        let stores = Stores::open(&config).await?;
        Ok(Self { stores, config })
    }

    fn auth(&self) -> Result<&std::sync::Arc<dyn crate::store::AuthStore>, OperatorError> {
        self.stores.auth.as_ref().ok_or(OperatorError::NoAuth)
    }

    /// `relay users add EMAIL [--role R] [--limit N]`, the password read from `password_source`'s first line.
    pub async fn add(
        &self,
        email: &str,
        role: Option<&str>,
        limit: Option<i64>,
        password_source: impl BufRead,
    ) -> Result<User, OperatorError> {
        let email = Email::parse(email).map_err(|e| OperatorError::Invalid(e.into()))?;
        let role = role
            .map(Role::parse)
            .transpose()
            .map_err(OperatorError::Invalid)?
            .unwrap_or(Role::User);
        let limit = check_limit(limit)?;
        let line = password_source
            .lines()
            .next()
            .transpose()
            .map_err(|e| {
                OperatorError::Invalid(format!("cannot read the password from standard input: {e}"))
            })?
            .unwrap_or_default();
        let password = Password::parse(line.trim_end_matches(['\r', '\n'])).map_err(|e| {
            OperatorError::Invalid(format!("{e} (read from the first line of standard input)"))
        })?;
        let auth_config = self.config.auth.clone().unwrap_or_default();
        let passwords = crate::accounts::Passwords::new(
            auth_config.argon2_memory_kib,
            auth_config.argon2_iterations,
        )?;
        let limit = limit.unwrap_or(auth_config.default_limit);
        create_account(
            self.auth()?.as_ref(),
            &passwords,
            email,
            &password,
            role,
            limit,
        )
        .await
    }

    pub async fn list(&self) -> Result<Vec<User>, OperatorError> {
        Ok(self.auth()?.list_users().await?)
    }

    pub async fn set(
        &self,
        email: &str,
        role: Option<&str>,
        limit: Option<i64>,
        reset_usage: bool,
    ) -> Result<User, OperatorError> {
        let changes = parse_changes(role, limit, reset_usage)?;
        set_user(self.auth()?.as_ref(), email, changes).await
    }

    /// `relay users set EMAIL --token-budget N`.
    pub async fn set_budget(&self, email: &str, token_budget: i64) -> Result<User, OperatorError> {
        let user = set_user(self.auth()?.as_ref(), email, UserChanges::default()).await?;
        set_token_budget(self.stores.memory.usage.as_ref(), &user, token_budget).await?;
        Ok(user)
    }

    /// `relay users set EMAIL --spend-budget USD`.
    pub async fn set_spend_budget(&self, email: &str, usd: f64) -> Result<User, OperatorError> {
        let user = set_user(self.auth()?.as_ref(), email, UserChanges::default()).await?;
        set_spend_budget(self.stores.memory.usage.as_ref(), &user, usd).await?;
        Ok(user)
    }

    /// `relay users set EMAIL --models a,b` (`Some`) or `--all-models` (`None`).
    pub async fn set_models(
        &self,
        email: &str,
        models: Option<Vec<String>>,
    ) -> Result<User, OperatorError> {
        // The models `relay serve` would offer with this configuration and environment.
        let offered = crate::providers::registry::Models::from_config(
            &self.config,
            &crate::config::ProcessEnv,
        )
        .map_err(OperatorError::Other)?;
        let models = check_models(models, &offered.names())?;
        let changes = UserChanges {
            allowed_models: Some(models),
            ..UserChanges::default()
        };
        set_user(self.auth()?.as_ref(), email, changes).await
    }

    /// `relay users signout EMAIL`: ends every session and refresh token of the account.
    pub async fn signout(&self, email: &str) -> Result<u64, OperatorError> {
        let signin = self.stores.signin.as_ref().ok_or(OperatorError::NoAuth)?;
        signout_user(self.auth()?.as_ref(), signin.as_ref(), email).await
    }

    /// `relay users unlock EMAIL`: lifts the account's sign-in lock.
    pub async fn unlock(&self, email: &str) -> Result<(), OperatorError> {
        unlock_user(self.auth()?.as_ref(), email).await
    }

    /// `relay users list`: every account with its units, tokens and their periods (this
    /// month's counts: a new month's roll-over runs first, as the server's would).
    pub async fn list_standing(&self) -> Result<Vec<Standing>, OperatorError> {
        let auth = self.auth()?;
        let auth_config = self.config.auth.clone().unwrap_or_default();
        let period = crate::usage::period::QuotaMonth::new(auth_config.quota_period);
        let now = crate::clock::now();
        period.roll(auth.as_ref(), now).await?;
        let mut out = Vec::new();
        for user in auth.list_users().await? {
            out.push(
                standing(
                    self.stores.memory.usage.as_ref(),
                    Some(crate::usage::budget::Defaults::of(&auth_config)),
                    &period,
                    user,
                    now,
                )
                .await?,
            );
        }
        Ok(out)
    }

    /// Deletes the account, its sessions, and every note it stored.
    pub async fn delete(&self, email: &str) -> Result<User, OperatorError> {
        delete_user(
            self.auth()?.as_ref(),
            self.stores.memory.memory.as_ref(),
            self.stores.memory.usage.as_ref(),
            email,
        )
        .await
    }
}

/// Creates an account from checked parts: the one code path of `relay users add` and
/// `POST /v1/admin/users`.
pub async fn create_account(
    auth: &dyn AuthStore,
    passwords: &crate::accounts::Passwords,
    email: Email,
    password: &Password,
    role: Role,
    limit: i64,
) -> Result<User, OperatorError> {
    let password_hash = passwords
        .hash(password.expose())
        .await
        .map_err(|e| OperatorError::Invalid(e.message.into_owned()))?;
    let new = NewUser {
        id: crate::accounts::new_user_id(),
        email: email.clone(),
        password_hash,
        role,
        limit,
        created_at: crate::clock::now(),
    };
    match auth.create_user(new).await {
        Err(StoreError::Conflict(_)) => Err(OperatorError::Exists(email.to_string())),
        other => Ok(other?),
    }
}

/// A role and a limit as `relay users set` and `PATCH /v1/admin/users/{email}` take them, checked.
pub fn parse_changes(
    role: Option<&str>,
    limit: Option<i64>,
    reset_usage: bool,
) -> Result<UserChanges, OperatorError> {
    Ok(UserChanges {
        role: role
            .map(Role::parse)
            .transpose()
            .map_err(OperatorError::Invalid)?,
        limit: check_limit(limit)?,
        reset_usage,
        allowed_models: None,
    })
}

/// Changes one account: the one code path of `relay users set` and the admin endpoint.
pub async fn set_user(
    auth: &dyn AuthStore,
    email: &str,
    changes: UserChanges,
) -> Result<User, OperatorError> {
    let email = Email::parse(email).map_err(|e| OperatorError::Invalid(e.into()))?;
    auth.update_user(email.as_str(), changes)
        .await?
        .ok_or_else(|| OperatorError::NoSuchUser(email.to_string()))
}

/// Deletes the account, its sessions, every note it stored and its usage records: the one code
/// path of `relay users delete` and the admin endpoint.
pub async fn delete_user(
    auth: &dyn AuthStore,
    memory: &dyn MemoryStore,
    usage: &dyn crate::store::usage::UsageStore,
    email: &str,
) -> Result<User, OperatorError> {
    let email = Email::parse(email).map_err(|e| OperatorError::Invalid(e.into()))?;
    let user = auth
        .delete_user(email.as_str())
        .await?
        .ok_or_else(|| OperatorError::NoSuchUser(email.to_string()))?;
    memory.delete_all_notes(&user.id).await?;
    // A deleted account's user id is never issued again, so its note counters can go too.
    memory.forget_counters(&user.id).await?;
    usage.delete_user_legs(&user.id, true).await?;
    Ok(user)
}

/// Ends every session and refresh token of the account (its API keys stay), so every signed-in
/// agent and browser must sign in again: the one code path of `relay users signout` and
/// `DELETE /v1/admin/users/{email}/sessions`. Returns how many tokens went.
pub async fn signout_user(
    auth: &dyn AuthStore,
    signin: &dyn crate::store::signin::SignInStore,
    email: &str,
) -> Result<u64, OperatorError> {
    let email = Email::parse(email).map_err(|e| OperatorError::Invalid(e.into()))?;
    let user = auth
        .user_by_email(email.as_str())
        .await?
        .ok_or_else(|| OperatorError::NoSuchUser(email.to_string()))?
        .0;
    Ok(signin.revoke_user_sessions(&user.id).await?)
}

/// Refuses to demote or delete `email` when it is the only admin: nobody could manage accounts
/// through the API afterwards. The admin endpoints call it; `relay users` does not, since the
/// operator on the server is the way back (and may mean it). A check before the change, not a
/// constraint: two admins demoting each other at the same instant could still both succeed.
pub async fn keep_an_admin(auth: &dyn AuthStore, email: &str) -> Result<(), OperatorError> {
    let email = Email::parse(email).map_err(|e| OperatorError::Invalid(e.into()))?;
    let email = email.as_str();
    let users = auth.list_users().await?;
    let is_admin = |u: &&User| u.role == Role::Admin;
    let target_is_admin = users.iter().filter(is_admin).any(|u| u.email == email);
    if target_is_admin && users.iter().filter(is_admin).count() == 1 {
        return Err(OperatorError::LastAdmin(email.to_owned()));
    }
    Ok(())
}

/// Sets an account's monthly token budget: the one code path of `relay users set --token-budget`
/// and `PATCH /v1/admin/users/{email}`.
pub async fn set_token_budget(
    usage: &dyn crate::store::usage::UsageStore,
    user: &User,
    token_budget: i64,
) -> Result<(), OperatorError> {
    if token_budget < -1 {
        return Err(OperatorError::Invalid(format!(
            "token_budget must be -1 (unlimited) or a count of tokens, not {token_budget}"
        )));
    }
    usage.set_budget(&user.id, token_budget).await?;
    Ok(())
}

/// Sets an account's monthly spend budget in USD: the one code path of `relay users set
/// --spend-budget` and `PATCH /v1/admin/users/{email}`.
pub async fn set_spend_budget(
    usage: &dyn crate::store::usage::UsageStore,
    user: &User,
    usd: f64,
) -> Result<(), OperatorError> {
    if !usd.is_finite() || (usd < 0.0 && usd != -1.0) {
        return Err(OperatorError::Invalid(format!(
            "spend_budget_usd must be -1 (unlimited) or an amount in USD, not {usd}"
        )));
    }
    usage.set_spend_budget(&user.id, usd).await?;
    Ok(())
}

/// An allowlist of models, checked against the configured ones (`None`: every model). Names
/// are trimmed and repeats dropped; an unknown name is refused, naming it and the known ones.
pub fn check_models(
    models: Option<Vec<String>>,
    configured: &[&str],
) -> Result<Option<Vec<String>>, OperatorError> {
    let Some(models) = models else {
        return Ok(None);
    };
    let mut names: Vec<String> = Vec::with_capacity(models.len());
    for name in models {
        let name = name.trim().to_owned();
        if !configured.contains(&name.as_str()) {
            return Err(OperatorError::Invalid(format!(
                "allowed_models names `{name}`, which is not a configured model; configured: {}",
                configured.join(", ")
            )));
        }
        if !names.contains(&name) {
            names.push(name);
        }
    }
    Ok(Some(names))
}

/// The message speaks of `limit`, the word of both the API's field and the CLI's `--limit`.
pub fn check_limit(limit: Option<i64>) -> Result<Option<i64>, OperatorError> {
    match limit {
        Some(n) if n < -1 => Err(OperatorError::Invalid(format!(
            "limit must be -1 (unlimited) or a count, not {n}"
        ))),
        other => Ok(other),
    }
}

/// Lifts an account's sign-in lock on every instance: failures until now stop counting. The one
/// code path of `relay users unlock` and `DELETE /v1/admin/users/{email}/lock`.
pub async fn unlock_user(auth: &dyn AuthStore, email: &str) -> Result<(), OperatorError> {
    let email = Email::parse(email).map_err(|e| OperatorError::Invalid(e.into()))?;
    if auth
        .unlock_signin(email.as_str(), crate::clock::now())
        .await?
    {
        Ok(())
    } else {
        Err(OperatorError::NoSuchUser(email.to_string()))
    }
}

/// An account with what it may use and has used: units with their period, tokens this month
/// (issue 42). `relay users list` prints it, `GET /v1/admin/users` answers it.
#[derive(Debug, Clone)]
pub struct Standing {
    pub user: User,
    pub quota_period: crate::config::QuotaPeriod,
    pub quota_resets_at: Option<String>,
    /// The account's own budget, else the default; -1 unlimited.
    pub token_budget: i64,
    pub tokens_used: i64,
    pub tokens_resets_at: String,
    /// The account's own spend budget in USD, else the default; -1 unlimited.
    pub spend_budget_usd: f64,
    pub spend_used_usd: f64,
}

/// `user`'s standing at `now`; `defaults` are `[auth]`'s default budgets.
pub async fn standing(
    usage: &dyn crate::store::usage::UsageStore,
    defaults: Option<crate::usage::budget::Defaults>,
    period: &crate::usage::period::QuotaMonth,
    user: User,
    now: f64,
) -> Result<Standing, OperatorError> {
    let budget = crate::usage::budget::of(usage, defaults, &user.id)
        .await
        .map_err(|e| OperatorError::Other(anyhow::anyhow!("{}", e.message)))?;
    Ok(Standing {
        quota_period: period.period(),
        quota_resets_at: period.resets_at(now),
        token_budget: budget.token_budget,
        tokens_used: budget.tokens_used,
        spend_budget_usd: budget.spend_budget_usd,
        spend_used_usd: budget.spend_used_usd,
        tokens_resets_at: crate::usage::period::rfc3339(crate::usage::period::next_month_start(
            crate::clock::now() as i64,
        )),
        user,
    })
}

/// One line per account for `relay users list`: units and tokens with their periods and resets.
pub fn format_standing(s: &Standing) -> String {
    let u = &s.user;
    let units_limit = if u.unlimited() {
        "unlimited".to_owned()
    } else {
        u.limit.to_string()
    };
    let units = match &s.quota_resets_at {
        Some(at) => format!("units {}/{units_limit} this month (resets {at})", u.used),
        None => format!("units {}/{units_limit} (lifetime, never resets)", u.used),
    };
    let budget = if s.token_budget < 0 {
        "unlimited".to_owned()
    } else {
        s.token_budget.to_string()
    };
    let spend = if s.spend_budget_usd < 0.0 {
        "unlimited".to_owned()
    } else {
        format!("${:.2}", s.spend_budget_usd)
    };
    let models = u
        .allowed_models
        .as_ref()
        .map_or_else(|| "all".to_owned(), |m| m.join(","));
    format!(
        "{}\t{}\t{}\t{units}\ttokens {}/{budget} this month (resets {})\tspend ${:.2}/{spend} this month\tmodels {models}",
        u.email,
        u.role.as_str(),
        u.id,
        s.tokens_used,
        s.tokens_resets_at,
        s.spend_used_usd,
    )
}

/// One line per account for `relay users list`.
pub fn format_user(u: &User) -> String {
    let limit = if u.unlimited() {
        "unlimited".to_owned()
    } else {
        u.limit.to_string()
    };
    let models = u
        .allowed_models
        .as_ref()
        .map_or_else(String::new, |m| format!("\tmodels {}", m.join(",")));
    format!(
        "{}\t{}\t{}\tused {}\tlimit {}{models}",
        u.email,
        u.role.as_str(),
        u.id,
        u.used,
        limit
    )
}
