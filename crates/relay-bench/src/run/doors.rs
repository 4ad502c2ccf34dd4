//! The door rows (issue 39, `crate::doors`): Relay with an `anthropic` provider and an `openai`
//! one on the mock, the bare proxy in front of the same mock, and Claude Code-sized bodies sent
//! one at a time through each, in short alternating rounds.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};

use super::Options;
use super::steps::{admin_token, http_client, start_relay};
use crate::doors::{
    DoorRow, Endpoint, SAME_FAMILY_MODEL, TRANSLATED_MODEL, claude_code_body, measure_path,
    measure_row,
};
use crate::floor::{Client, Floor};
use crate::mock::Mock;
use crate::relay;

/// The sizes measured: the recorded request as it is (0: no growth), 300 KB and 1 MB.
pub const SIZES: [usize; 3] = [0, 300_000, 1_000_000];

/// The translated row's size.
pub const TRANSLATED_SIZE: usize = 300_000;

/// How long each path runs per round, and how many rounds.
#[derive(Debug, Clone, Copy)]
pub struct DoorScale {
    pub rounds: usize,
    pub per_round: Duration,
}

/// The door rows: one per size through the same-family door, then the translated one.
pub async fn measure(
    opts: &Options,
    mock: &Mock,
    dir: &Path,
    scale: DoorScale,
) -> Result<Vec<DoorRow>> {
    let floor_exe = opts
        .floor_exe
        .as_deref()
        .context("the door rows need relay-bench-floor beside relay-bench (cargo build --release -p relay-bench)")?;
    let http = http_client()?;
    let sub = dir.join("doors");
    std::fs::create_dir_all(&sub)?;
    let config = relay::write_config(&sub, &mock.base_url())?;
    // The mock also answers Anthropic's `/v1/messages`; an `anthropic` provider's base URL ends
    // before `/v1`.
    let origin = mock
        .base_url()
        .strip_suffix("/v1")
        .context("the mock's base URL ends in /v1")?
        .to_owned();
    let mut text = std::fs::read_to_string(&config)?;
    text.push_str(&format!(
        r#"
[[providers]]
name = "mock-anthropic"
kind = "anthropic"
base_url = "{origin}"

[[models]]
name = "{SAME_FAMILY_MODEL}"
provider = "mock-anthropic"
upstream = "claude-sonnet-4-5"

[[models]]
name = "{TRANSLATED_MODEL}"
provider = "mock"
upstream = "{fast}"
"#,
        fast = crate::data::FAST_MODEL
    ));
    std::fs::write(&config, text)?;
    let relay = start_relay(opts, &config, &sub, &http, 90).await?;
    let token = admin_token(opts, &config, &http, &relay.base()).await?;
    let floor = Floor::start(floor_exe, &mock.base_url(), Client::Plain, None).await?;

    let direct = Endpoint {
        url: format!("{origin}/v1/messages"),
        headers: vec![],
        pid: None,
    };
    let through_floor = Endpoint {
        url: format!("{}/v1/messages", floor.base()),
        headers: vec![],
        pid: Some(floor.pid),
    };
    let through_relay = Endpoint {
        url: format!("{}/v1/messages", relay.base()),
        headers: vec![
            ("x-api-key", token.clone()),
            ("anthropic-version", "2023-06-01".to_owned()),
        ],
        pid: Some(relay.pid),
    };
    let mut rows = Vec::new();
    for size in SIZES {
        let body = claude_code_body(SAME_FAMILY_MODEL, size)?;
        eprintln!(
            "  /v1/messages, {} KB: direct, bare proxy, Relay",
            body.len() / 1000
        );
        let row = measure_row(
            &http,
            "same family",
            &body,
            [&direct, &through_floor, &through_relay],
            scale.rounds,
            scale.per_round,
        )
        .await?;
        eprintln!(
            "    added p50 {:.2} / p99 {:.2} ms (bare proxy {:.2} / {:.2}); CPU per call Relay {:.3} ms, bare proxy {:.3} ms",
            row.added().0,
            row.added().1,
            row.floor_added().0,
            row.floor_added().1,
            row.relay.cpu_ms_per_call.unwrap_or(f64::NAN),
            row.floor.cpu_ms_per_call.unwrap_or(f64::NAN),
        );
        rows.push(row);
    }
    // Translated: the same door, the model on the openai provider. Its bare-proxy and direct
    // figures are the same-family row's at that size (the same bytes forwarded as they are).
    let body = claude_code_body(TRANSLATED_MODEL, TRANSLATED_SIZE)?;
    eprintln!("  /v1/messages → openai provider, {} KB", body.len() / 1000);
    let mut translated = Vec::new();
    for round in 0..scale.rounds {
        let warm = if round == 0 { 5 } else { 1 };
        translated.push(
            measure_path(
                &http,
                &through_relay,
                &body,
                "message_stop",
                warm,
                scale.per_round,
            )
            .await?,
        );
    }
    if let Some(same) = rows.iter().find(|r| r.body_bytes >= TRANSLATED_SIZE) {
        let relay_path = crate::doors::combine(&translated);
        let row = DoorRow {
            kind: "translated (openai provider)".into(),
            body_bytes: body.len(),
            direct: same.direct.clone(),
            floor: same.floor.clone(),
            relay: relay_path,
        };
        eprintln!(
            "    CPU per call Relay {:.3} ms ({:.2} × the bare proxy's)",
            row.relay.cpu_ms_per_call.unwrap_or(f64::NAN),
            row.cpu_ratio()
        );
        rows.push(row);
    }
    relay.stop().await?;
    drop(floor);
    Ok(rows)
}
