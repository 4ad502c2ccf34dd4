//! The `relay` binary: only the command-line definitions; the service is in `relay-server`, the
//! client commands in `client`.

mod client;

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use relay_server::config::{Config, ProcessEnv, TelemetryConfig};
use relay_server::operator::{self, Users};

/// jemalloc in place of glibc's malloc: under load glibc's allocator was 12 % of Relay's CPU
/// (perf, 1,000 legs/s); docs/DEPENDENCIES.md has the measurements behind the choice.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "relay",
    version,
    about = "Relay: the backend of an AI coding terminal"
)]
struct Cli {
    /// TOML configuration file.
    #[arg(long, global = true, env = "RELAY_CONFIG")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the service.
    Serve {
        /// Listen on a non-loopback address even in open mode (no accounts).
        #[arg(long)]
        allow_open: bool,
        /// Log as JSON lines instead of text.
        #[arg(long)]
        log_json: bool,
    },
    /// Manage accounts on the configured auth store.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Print the OpenAPI document.
    Openapi,
    #[command(flatten)]
    Client(client::ClientCommand),
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Create an account; asks for the password (not echoed) on a terminal, else reads the
    /// first line of standard input.
    Add {
        email: String,
        #[arg(long)]
        role: Option<String>,
        /// Quota; -1 is unlimited.
        #[arg(long, allow_hyphen_values = true)]
        limit: Option<i64>,
    },
    /// List accounts with their units and tokens, periods and resets.
    List,
    /// Lift an account's sign-in lock (too many wrong passwords) on every instance, at once.
    Unlock { email: String },
    /// Change an account's role, quota or usage.
    Set {
        email: String,
        #[arg(long)]
        role: Option<String>,
        #[arg(long, allow_hyphen_values = true)]
        limit: Option<i64>,
        #[arg(long)]
        reset_usage: bool,
        /// Input plus output tokens per calendar month (UTC); -1 is unlimited.
        #[arg(long, allow_hyphen_values = true)]
        token_budget: Option<i64>,
        /// USD per calendar month (UTC), counted from the usage ledger's prices; -1 is unlimited.
        #[arg(long, allow_hyphen_values = true)]
        spend_budget: Option<f64>,
        /// The only configured models the account may use, comma-separated (`--models a,b`).
        #[arg(long, value_delimiter = ',', num_args = 1.., conflicts_with = "all_models")]
        models: Option<Vec<String>>,
        /// Let the account use every configured model again.
        #[arg(long)]
        all_models: bool,
    },
    /// Delete an account and all its data.
    Delete { email: String },
    /// End every session and refresh token of an account: its agents must sign in again.
    Signout { email: String },
}

/// Logs to stderr, and spans to the OTLP collector when `[telemetry]` names one (the returned
/// exporter is flushed at exit).
fn init_logging(
    json: bool,
    telemetry: &TelemetryConfig,
) -> anyhow::Result<Option<relay_server::telemetry::Tracing>> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    let filter = tracing_subscriber::EnvFilter::try_from_env("RELAY_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let (otel, exporter) = match relay_server::telemetry::layer(telemetry)? {
        Some((layer, exporter)) => (Some(layer), Some(exporter)),
        None => (None, None),
    };
    let fmt = if json {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .json()
            .flatten_event(true)
            .boxed()
    } else {
        tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::stderr().is_terminal())
            .boxed()
    };
    tracing_subscriber::registry()
        .with(filter)
        .with(otel)
        .with(fmt)
        .init();
    Ok(exporter)
}

/// The new account's password: asked twice without echo on a terminal, else the first line of
/// standard input (`echo … | relay users add`).
fn new_password(email: &str) -> anyhow::Result<String> {
    if !std::io::stdin().is_terminal() {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::stdin().lock(), &mut line)?;
        return Ok(line.trim_end_matches(['\r', '\n']).to_owned());
    }
    let first = rpassword::prompt_password(format!("password for {email}: "))?;
    let again = rpassword::prompt_password("the same password again: ")?;
    if first != again {
        anyhow::bail!("the two passwords differ; nothing was changed");
    }
    Ok(first)
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("relay: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Client(command) => client::run(command).await,
        Command::Openapi => {
            println!(
                "{}",
                relay_server::http::routes::openapi().to_pretty_json()?
            );
            Ok(())
        }
        Command::Serve {
            allow_open,
            log_json,
        } => {
            let config = Config::load(cli.config.as_deref(), &ProcessEnv)?;
            let exporter = init_logging(log_json, &config.telemetry)?;
            operator::check_open_bind(&config, allow_open)?;
            let listener = tokio::net::TcpListener::bind(config.bind)
                .await
                .map_err(|e| anyhow::anyhow!("cannot listen on {}: {e}", config.bind))?;
            let bound = listener.local_addr()?;
            let relay = relay_server::Relay::from_config(config).await?;
            let state = relay.state();
            tracing::info!(
                "{}",
                operator::startup_summary(state.config(), bound, &state.providers_summary())
            );
            // Where to go next, on stdout so that it shows whatever RELAY_LOG says.
            println!("{}", operator::addresses(state.config(), bound));
            if state.models().demo_only {
                tracing::warn!(
                    "NO MODEL PROVIDER CONFIGURED: every agent leg is answered by the built-in offline `demo` \
                     model. Set OPENAI_API_KEY, ANTHROPIC_API_KEY or GEMINI_API_KEY, or add [[providers]] \
                     and [[models]] to the configuration."
                );
            }
            let served = relay_server::http::shutdown::serve_bounded(
                &relay,
                listener,
                relay_server::shutdown_signal(),
            )
            .await;
            relay.close().await;
            if let Some(exporter) = exporter {
                // Off the async workers: shutting down waits for the batch task's last export.
                let _ = tokio::task::spawn_blocking(move || exporter.shutdown()).await;
            }
            served?;
            Ok(())
        }
        Command::Users { command } => {
            let config = Config::load(cli.config.as_deref(), &ProcessEnv)?;
            let users = Users::open(config).await?;
            match command {
                UsersCommand::Add { email, role, limit } => {
                    let password = new_password(&email)?;
                    let u = users
                        .add(
                            &email,
                            role.as_deref(),
                            limit,
                            std::io::Cursor::new(password),
                        )
                        .await?;
                    println!("added {}", operator::format_user(&u));
                }
                UsersCommand::List => {
                    for s in users.list_standing().await? {
                        println!("{}", operator::format_standing(&s));
                    }
                }
                UsersCommand::Unlock { email } => {
                    users.unlock(&email).await?;
                    println!(
                        "unlocked {email}: its earlier failed sign-ins no longer count (a running relay sees it at once)"
                    );
                }
                UsersCommand::Set {
                    email,
                    role,
                    limit,
                    reset_usage,
                    token_budget,
                    spend_budget,
                    models,
                    all_models,
                } => {
                    let mut u = users
                        .set(&email, role.as_deref(), limit, reset_usage)
                        .await?;
                    if let Some(n) = token_budget {
                        u = users.set_budget(&email, n).await?;
                    }
                    if let Some(usd) = spend_budget {
                        u = users.set_spend_budget(&email, usd).await?;
                    }
                    if models.is_some() || all_models {
                        u = users.set_models(&email, models).await?;
                    }
                    println!("updated {}", operator::format_user(&u));
                }
                UsersCommand::Delete { email } => {
                    let u = users.delete(&email).await?;
                    println!("deleted {} and all its data", u.email);
                }
                UsersCommand::Signout { email } => {
                    let n = users.signout(&email).await?;
                    println!(
                        "signed out {email}: {n} tokens revoked (sessions and refresh tokens; API keys stay)"
                    );
                }
            }
            Ok(())
        }
    }
}
