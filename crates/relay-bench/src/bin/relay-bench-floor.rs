//! `relay-bench-floor`: the bare streaming proxy the open-stream row is measured beside
//! (`relay_bench::floor`), as a process of its own with Relay's allocator, so its RSS compares.

use clap::Parser;
use relay_bench::floor::{Client, run_process};

/// jemalloc, as in the `relay` binary: the same allocator, or the two RSS figures would differ by
/// the allocator alone.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser)]
#[command(
    name = "relay-bench-floor",
    about = "A bare streaming proxy: Relay's connection server, one upstream client, nothing else"
)]
struct Cli {
    /// The upstream's OpenAI-style base URL, e.g. http://127.0.0.1:9000/v1.
    #[arg(long)]
    upstream: String,
    #[arg(long, value_enum, default_value = "reqwest")]
    client: Client,
    /// The PEM certificate an HTTPS upstream is signed with (the HTTPS mock writes it).
    #[arg(long)]
    ca_file: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    run_process(cli.upstream, cli.client, cli.ca_file).await
}
