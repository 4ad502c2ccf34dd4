//! The client side of the `relay` binary: `login`, `logout`, `whoami` and `agent`, all on
//! `relay-client`; `project`, and the `claude` and `codex` launchers (`launch.rs`). Which relay
//! and which token: `--server`, else `RELAY_URL`, else the local default;
//! `RELAY_TOKEN`, else the token `relay login` stored for that server, else none (open mode).

mod agent;
mod approval;
mod credentials;
mod diff;
mod display;
mod editor;
mod highlight;
mod interactive;
mod launch;
mod live;
mod login;
mod markdown;
mod project;
mod role;
mod rules;
mod sessions;
mod settings;
mod slash;
mod tools;

use clap::Subcommand;
use relay_client::{Client, Error};
use relay_wire::ErrorCode;

pub use agent::AgentArgs;

/// Where a client talks to when nothing says otherwise (spec §1).
pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7711";

#[derive(Subcommand)]
pub enum ClientCommand {
    /// Sign in to a relay and store the token (password from the terminal or stdin's first line).
    Login {
        #[arg(long)]
        server: Option<String>,
        #[arg(long)]
        email: Option<String>,
    },
    /// Sign out and forget the stored token.
    Logout {
        #[arg(long)]
        server: Option<String>,
    },
    /// Print the account the token belongs to (`GET /v1/me`).
    Whoami {
        #[arg(long)]
        server: Option<String>,
    },
    /// Run the coding agent: with -p to the end of one task, else an interactive session.
    Agent(AgentArgs),
    /// Print the current directory's project id (what notes are filed under) and how it was derived.
    Project,
    /// Run Claude Code (`claude` on PATH) against this relay for the current project, with Relay's
    /// notes as MCP tools; every argument passes through to it.
    #[command(disable_help_flag = true)]
    Claude {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
    /// Run Codex (`codex` on PATH) against this relay for the current project, with Relay's notes
    /// as MCP tools; every argument passes through to it.
    #[command(disable_help_flag = true)]
    Codex {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
        args: Vec<std::ffi::OsString>,
    },
    /// API keys of the signed-in account, for scripts, CI and agents that do not sign in.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
        #[arg(long, global = true)]
        server: Option<String>,
    },
}

#[derive(clap::Subcommand)]
pub enum KeysCommand {
    /// Create a key and print it (shown this once).
    Create {
        name: String,
        /// Days until the key stops working; without it, it does not expire.
        #[arg(long)]
        expires_in_days: Option<u32>,
    },
    /// List the keys: id, name, prefix, created, last used, expiry.
    List,
    /// Revoke a key by its id.
    Revoke { id: String },
}

pub async fn run(command: ClientCommand) -> anyhow::Result<()> {
    match command {
        ClientCommand::Login { server, email } => login::login(server, email).await,
        ClientCommand::Logout { server } => login::logout(server).await,
        ClientCommand::Whoami { server } => login::whoami(server).await,
        ClientCommand::Agent(args) => agent::run(args).await,
        ClientCommand::Project => launch::print_project(),
        ClientCommand::Claude { args } => exit_with(launch::claude(args).await?),
        ClientCommand::Codex { args } => exit_with(launch::codex(args).await?),
        ClientCommand::Keys { command, server } => keys(command, server).await,
    }
}

/// `relay keys create|list|revoke`.
async fn keys(command: KeysCommand, server: Option<String>) -> anyhow::Result<()> {
    let server = server_url(server);
    let client = connect(&server)?;
    // A day is enough to tell keys apart; UTC, as the server counts.
    let when = |t: Option<f64>| {
        t.map_or_else(
            || "-".to_owned(),
            |t| {
                let (y, m, d) =
                    relay_server::store::usage::civil_from_days((t as i64).div_euclid(86_400));
                format!("{y:04}-{m:02}-{d:02}")
            },
        )
    };
    match command {
        KeysCommand::Create {
            name,
            expires_in_days,
        } => {
            let created = client
                .create_key(&name, expires_in_days)
                .await
                .map_err(|e| explain(&server, e))?;
            println!("{}", created.key);
            eprintln!(
                "key {} ({}) created; it is not shown again. Use it as Authorization: Bearer <key> \
                 (ANTHROPIC_AUTH_TOKEN for Claude Code).",
                created.info.id,
                display::line(&created.info.name)
            );
        }
        KeysCommand::List => {
            let list = client.list_keys().await.map_err(|e| explain(&server, e))?;
            for k in list.keys {
                println!(
                    "{}  {}  {}…  created {}  last used {}  expires {}",
                    k.id,
                    display::line(&k.name),
                    k.prefix,
                    when(Some(k.created_at)),
                    when(k.last_used_at),
                    when(k.expires_at),
                );
            }
        }
        KeysCommand::Revoke { id } => {
            client
                .revoke_key(&id)
                .await
                .map_err(|e| explain(&server, e))?;
            println!("revoked {id}");
        }
    }
    Ok(())
}

/// The relay's URL: the flag, else `RELAY_URL`, else the default.
fn server_url(flag: Option<String>) -> String {
    flag.or_else(|| std::env::var("RELAY_URL").ok().filter(|s| !s.is_empty()))
        .unwrap_or_else(|| DEFAULT_SERVER.to_owned())
        .trim_end_matches('/')
        .to_owned()
}

/// A client for `server` with `RELAY_TOKEN`, else the stored token, else none.
fn connect(server: &str) -> anyhow::Result<Client> {
    let token = match std::env::var("RELAY_TOKEN").ok().filter(|t| !t.is_empty()) {
        Some(t) => Some(t),
        None => credentials::Store::open()?.token(server),
    };
    Ok(Client::new(server)?.with_token(token))
}

/// The user-facing sentence for a failed call: what to do about it where there is something to do.
fn explain(server: &str, e: Error) -> anyhow::Error {
    match (e.status(), e.code()) {
        (Some(401), _) => anyhow::anyhow!(
            "{server} refused the request: not signed in or the token expired (HTTP 401). Run `relay login --server {server}`."
        ),
        (_, Some(ErrorCode::QuotaExceeded)) => {
            anyhow::anyhow!(
                "quota exceeded (HTTP 403 quota_exceeded): {}",
                display::line(&message(&e))
            )
        }
        // Not "used up": a call is refused too when its prompt does not fit what is left; nor
        // "token": the spend budget answers with the same code. The relay's message says which
        // budget and why (issue 42: a limit the user can understand).
        (_, Some(ErrorCode::BudgetExceeded)) => anyhow::anyhow!(
            "refused by the account's monthly budget (HTTP 403 budget_exceeded): {}",
            display::line(&message(&e))
        ),
        // The relay's (or a provider's) words, which may carry control characters.
        _ => anyhow::anyhow!("{}", display::line(&e.to_string())),
    }
}

fn message(e: &Error) -> String {
    match e {
        Error::Api { message, .. } => message.clone(),
        other => other.to_string(),
    }
}

/// Ends `relay` with the agent's exit status (its temporary files are gone by now).
fn exit_with(code: i32) -> anyhow::Result<()> {
    if code != 0 {
        std::process::exit(code);
    }
    Ok(())
}
