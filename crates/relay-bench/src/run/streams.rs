//! The open-stream measurement: legs held open through Relay and through the bare proxy, over
//! plain HTTP and over HTTPS with HTTP/2 (`relay-bench streams`, and a stage of the full run).

use anyhow::Result;

use super::Options;
use super::steps::{admin_token, check_leg, http_client, start_mock, start_relay};
use crate::mock::Mock;
use crate::relay;

/// Only the open-stream measurement: mock, Relay, `streams` open legs, then the same legs through
/// the bare proxy with each upstream client (when `relay-bench-floor` is there).
pub async fn streams_only(
    opts: &Options,
    streams: usize,
) -> Result<(
    crate::streams::StreamsResult,
    Vec<crate::report::FloorStreams>,
)> {
    let dir = tempfile::tempdir()?;
    let http = http_client()?;
    let mock = start_mock(opts).await?;
    let config = relay::write_config(dir.path(), &mock.base_url())?;
    let relay = start_relay(opts, &config, dir.path(), &http, 1).await?;
    let base = relay.base();
    let token = admin_token(opts, &config, &http, &base).await?;
    let result = warm_then_hold(&http, &relay, &token, &mock.base_url(), streams).await?;
    relay.stop().await?;
    let mut floor = floor_streams(opts, &mock.base_url(), None, streams).await?;
    mock.stop().await;
    if let Some((relay_https, floor_https)) =
        https_streams(opts, dir.path(), &http, streams).await?
    {
        eprintln!(
            "over HTTPS with HTTP/2: Relay {:.1} KB per stream ({} open)",
            relay_https.bytes_per_stream / 1000.0,
            relay_https.opened
        );
        floor.extend(floor_https);
    }
    Ok((result, floor))
}

/// 20 ordinary legs first, so pools and allocator arenas exist before the baseline is read, then
/// `streams` slow legs held open through `relay` to the mock at `upstream`.
pub(super) async fn warm_then_hold(
    http: &reqwest::Client,
    relay: &relay::Running,
    token: &str,
    upstream: &str,
    streams: usize,
) -> Result<crate::streams::StreamsResult> {
    let base = relay.base();
    for _ in 0..20 {
        check_leg(http, &base, token).await?;
    }
    let sockets = crate::streams::Sockets::for_upstream(upstream);
    let result = crate::streams::hold_open(&base, token, streams, relay.pid, sockets).await?;
    eprintln!("  relay: {}", result.summary());
    Ok(result)
}

/// The open-stream measurement with the mock over HTTPS offering HTTP/2, as the cloud providers
/// serve: Relay restarted on the same database (`dir`) with the provider at `https://…` and the
/// mock's certificate as its `ca_file`, then the bare proxy on Relay's lanes in front of the same
/// mock. `None` when the mock cannot run as a process of its own (no `mock_exe`).
pub(super) async fn https_streams(
    opts: &Options,
    dir: &std::path::Path,
    http: &reqwest::Client,
    streams: usize,
) -> Result<
    Option<(
        crate::streams::StreamsResult,
        Vec<crate::report::FloorStreams>,
    )>,
> {
    let Some(exe) = &opts.mock_exe else {
        return Ok(None);
    };
    let ca = dir.join("mock-ca.pem");
    let mock = Mock::start_process_tls(exe, &ca).await?;
    let url = format!("sqlite://{}", dir.join("relay.db").display());
    let config =
        relay::write_config_on(dir, &mock.base_url(), Some(&ca), &url, "relay-https.toml")?;
    eprintln!(
        "relay-bench: {streams} open streams with the mock over HTTPS ({})",
        mock.base_url()
    );
    let relay = start_relay(opts, &config, dir, http, 3).await?;
    let token = relay::sign_in(http, &relay.base()).await?;
    let result = warm_then_hold(http, &relay, &token, &mock.base_url(), streams).await?;
    relay.stop().await?;
    let floor = match &opts.floor_exe {
        Some(floor_exe) => {
            let client = crate::floor::Client::Reqwest;
            eprintln!(
                "relay-bench: {streams} open streams through the bare proxy over HTTPS, {}",
                client.describe()
            );
            let result =
                crate::floor::measure(floor_exe, &mock.base_url(), client, Some(&ca), streams)
                    .await?;
            vec![crate::report::FloorStreams { client, result }]
        }
        None => Vec::new(),
    };
    mock.stop().await;
    Ok(Some((result, floor)))
}

/// The open-stream baseline: the same legs through the bare proxy, with each upstream client.
pub(super) async fn floor_streams(
    opts: &Options,
    upstream: &str,
    ca_file: Option<&std::path::Path>,
    streams: usize,
) -> Result<Vec<crate::report::FloorStreams>> {
    let Some(exe) = &opts.floor_exe else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for client in [
        crate::floor::Client::Plain,
        crate::floor::Client::Reqwest,
        crate::floor::Client::Hyper,
    ] {
        eprintln!(
            "relay-bench: {streams} open streams through the bare proxy, {}",
            client.describe()
        );
        let result = crate::floor::measure(exe, upstream, client, ca_file, streams).await?;
        eprintln!("  {}", result.summary());
        out.push(crate::report::FloorStreams { client, result });
    }
    Ok(out)
}
