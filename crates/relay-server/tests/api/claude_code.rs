//! The real Claude Code CLI through Relay: three prompts of one conversation (`claude -p`, then
//! `claude -c -p` twice), once straight at a caching Anthropic-style upstream and once through
//! Relay; the share of the prompt read from the cache through Relay is at least 0.95 of the
//! direct one, and the usage Claude Code reports is what the upstream reported.
//!
//! The binary comes from `tests/agents` (`npm ci`; `.ci/run` exports `RELAY_AGENTS_BIN`). With
//! `RELAY_AGENTS_BIN` set (or `CI=true`) and no binary the test fails; with neither it says
//! SKIPPED and passes.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::caching_fake::CachingUpstream;
use crate::helpers::{TestApp, open_config};
use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};

fn claude_bin() -> Option<PathBuf> {
    crate::agents_cli::agent_bin("claude")
}

/// Runs the three prompts against `base_url`; each run's JSON result, and how many requests
/// `fake` had seen when it ended.
async fn session(
    bin: &PathBuf,
    base_url: &str,
    model: &str,
    fake: &CachingUpstream,
) -> Vec<(Value, usize)> {
    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut results = Vec::new();
    for (i, prompt) in ["Say hi.", "Say hi again.", "And once more."]
        .iter()
        .enumerate()
    {
        let mut cmd = tokio::process::Command::new(bin);
        if i > 0 {
            cmd.arg("-c");
        }
        cmd.args([
            "-p",
            prompt,
            "--output-format",
            "json",
            "--allowedTools",
            "Bash",
            "--model",
            model,
        ])
        .current_dir(work.path())
        .env("HOME", home.path())
        .env("ANTHROPIC_BASE_URL", base_url)
        .env("ANTHROPIC_API_KEY", "sk-test")
        .env("ANTHROPIC_SMALL_FAST_MODEL", model)
        .env("DISABLE_AUTOUPDATER", "1")
        .env("DISABLE_TELEMETRY", "1")
        .env("DISABLE_ERROR_REPORTING", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .kill_on_drop(true);
        let out = tokio::time::timeout(std::time::Duration::from_secs(120), cmd.output())
            .await
            .expect("claude finished")
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "claude failed: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let result = serde_json::from_str(stdout.trim()).unwrap_or_else(|_| json!({"raw": stdout}));
        results.push((result, fake.counts().len()));
    }
    results
}

#[tokio::test]
async fn claude_code_reads_the_cache_through_relay_as_it_does_directly() {
    let Some(bin) = claude_bin() else {
        println!("SKIPPED: Claude Code is not installed (cd tests/agents && npm ci)");
        return;
    };
    let direct_fake = CachingUpstream::start().await;
    let direct = session(&bin, &direct_fake.url, "claude-sonnet-4-5", &direct_fake).await;

    let relay_fake = CachingUpstream::start().await;
    let url = relay_fake.url.clone();
    let app = TestApp::spawn_with(move |dir| {
        let mut c = open_config(dir);
        c.providers.push(ProviderConfig {
            base_url: Some(url),
            ..ProviderConfig::new("anthropic", ProviderKind::Anthropic)
        });
        c.models.push(ModelConfig {
            name: "claude-sonnet-4-5".into(),
            provider: "anthropic".into(),
            upstream: "claude-sonnet-4-5".into(),
            ..Default::default()
        });
        c
    })
    .await;
    let relayed = session(&bin, &app.url(""), "claude-sonnet-4-5", &relay_fake).await;
    let (direct_share, relay_share) = (direct_fake.cache_share(), relay_fake.cache_share());
    println!("cache share: direct {direct_share:.3}, through Relay {relay_share:.3}");
    assert!(direct_share > 0.5, "direct {direct_share}");
    assert!(
        relay_share >= 0.95 * direct_share,
        "relay {relay_share} vs direct {direct_share}"
    );
    // Claude Code's `usage` is its run's: the upstream's counts for that run's calls, summed.
    for (fake, runs) in [(&relay_fake, &relayed), (&direct_fake, &direct)] {
        let counts = fake.counts();
        let mut before = 0;
        for (result, seen) in runs {
            let upto = &counts[before..*seen];
            before = *seen;
            let usage = &result["usage"];
            assert_eq!(
                (
                    &usage["input_tokens"],
                    &usage["cache_read_input_tokens"],
                    &usage["cache_creation_input_tokens"]
                ),
                (
                    &json!(upto.iter().map(|c| c.0 - c.1 - c.2).sum::<u64>()),
                    &json!(upto.iter().map(|c| c.1).sum::<u64>()),
                    &json!(upto.iter().map(|c| c.2).sum::<u64>())
                ),
                "{result}"
            );
        }
    }
}
