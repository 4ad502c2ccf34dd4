//! The benchmark's smoke mode in `cargo test`: the whole pipeline at tiny scale, with Relay
//! in-process (no release build), the built-in load generator (no oha) and no LiteLLM, so the
//! harness cannot rot. It checks that every stage produced numbers, not the targets.

use relay_bench::{Options, Scale};

#[test]
fn smoke_pipeline_produces_every_figure() {
    let opts = Options {
        smoke: true,
        scale: Scale::smoke(),
        relay_bin: None,
        // The mock runs as the harness binary's own `mock` subcommand, as in a full run.
        mock_exe: Some(env!("CARGO_BIN_EXE_relay-bench").into()),
        floor_exe: Some(env!("CARGO_BIN_EXE_relay-bench-floor").into()),
        oha: None,
        litellm: None,
        // The machine's PostgreSQL, as the server's tests use it.
        postgres: Some(
            std::env::var("RELAY_TEST_PG_URL")
                .unwrap_or_else(|_| relay_bench::run::DEFAULT_ADMIN_URL.to_owned()),
        ),
        command: "cargo test -p relay-bench --test smoke".into(),
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let started = std::time::Instant::now();
    let report = runtime.block_on(relay_bench::run(&opts)).unwrap();
    let missing = report.missing();
    assert!(
        missing.is_empty(),
        "no numbers from: {missing:?}\n{}",
        report.markdown()
    );
    let table = report.markdown();
    for figure in [
        "Added latency at",
        "Highest leg rate",
        "Memory per open stream",
        "Note injection",
        "Suggestion from history",
        "Start to ready",
        "Idle RSS",
        "PostgreSQL (",
        "PostgreSQL: CPU per leg",
        "Prompt-cache share, 20-leg tool session, /v1/messages",
        "Prompt-cache share, 20-leg tool session, native: openai, notes injected",
        "usage ledger off",
        "GET /v1/usage?group_by=project over 20000 records",
        "usage ledger on / off (ms; median",
        "Claude Code body of 87 KB → anthropic",
        "translated (openai provider): CPU per call",
    ] {
        assert!(table.contains(figure), "{figure} is missing from\n{table}");
    }
    // The door rows: three sizes through the same family, one translated.
    assert_eq!(report.doors.len(), 4, "{table}");
    assert!(report.doors[2].body_bytes >= 1_000_000, "{table}");
    assert_eq!(report.streams.opened, 200, "{table}");
    // The open-stream baseline: the bare proxy, once per upstream client, the same legs open.
    assert_eq!(report.streams_floor.len(), 3, "{table}");
    for floor in &report.streams_floor {
        assert_eq!(floor.result.opened, 200, "{table}");
        assert!(floor.result.bytes_per_stream > 0.0, "{table}");
    }
    assert!(
        table.contains("Baseline: memory per open stream of a bare proxy"),
        "{table}"
    );
    // The same legs with the mock over HTTPS offering HTTP/2: Relay, then the bare proxy.
    let https = report.streams_https.as_ref().expect("the HTTPS rows ran");
    assert_eq!(https.opened, 200, "{table}");
    assert_eq!(report.streams_https_floor.len(), 1, "{table}");
    assert_eq!(report.streams_https_floor[0].result.opened, 200, "{table}");
    assert!(
        table.contains("Memory per open stream, upstream over HTTPS with HTTP/2 (KB)"),
        "{table}"
    );
    // Four doors, without and with notes; every session cached something directly and through
    // Relay (the share and bill targets are judged by the full run, not here).
    assert_eq!(report.cache.len(), 8, "{table}");
    for c in &report.cache {
        assert!(c.relay.read > 0 && c.direct.read > 0, "{c:?}");
    }
    let ledger = report.ledger.as_ref().expect("the ledger rows ran");
    assert!(
        ledger.on.cpu_ms_per_leg() > 0.0 && ledger.off.cpu_ms_per_leg() > 0.0,
        "{table}"
    );
    let usage = report
        .usage_query
        .as_ref()
        .expect("the usage query row ran");
    assert_eq!(usage.by.len(), 3, "{table}");
    let pg = report.postgres.as_ref().expect("the PostgreSQL rows ran");
    assert!(
        pg.at_rate.ok > 0 && pg.db_cpu_ms_per_leg_at_rate.is_some(),
        "{table}"
    );
    eprintln!("{table}\nsmoke run took {:?}", started.elapsed());
}
