//! `/metrics` in both exposition formats, checked by the real `promtool check metrics`.

use std::io::Write;
use std::process::{Command, Stdio};

use reqwest::StatusCode;

use crate::helpers::TestApp;

const PROMETHEUS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

const PROCESS_METRICS: [&str; 6] = [
    "process_cpu_seconds_total",
    "process_resident_memory_bytes",
    "process_virtual_memory_bytes",
    "process_open_fds",
    "process_max_fds",
    "process_start_time_seconds",
];

/// Pipes `text` through `promtool check metrics`; `None` when promtool is not installed.
/// promtool prints nothing and exits 0 only when it finds no problem at all.
fn promtool(text: &str) -> Option<(bool, String)> {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => panic!("cannot run promtool: {e}"),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success() && report.trim().is_empty(), report))
}

fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {name} in:\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test]
async fn the_text_exposition_passes_promtool_and_says_its_format() {
    let app = TestApp::open().await;
    app.get("/healthz", None).await;
    let r = app.get("/metrics", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    // Prometheus's text parser types a counter only when its TYPE line names the sample.
    assert!(
        text.contains("# TYPE relay_http_requests_total counter\n"),
        "{text}"
    );
    assert!(!text.contains("# EOF"), "{text}");
    assert!(
        text.contains(&format!(
            "relay_build_info{{version=\"{}\"}} 1\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{text}"
    );
    for name in PROCESS_METRICS {
        assert!(text.contains(&format!("\n# TYPE {name} ")), "no {name}");
    }
    // The readings are this process's own: it is resident, has files open, started lately.
    assert!(sample(&text, "process_resident_memory_bytes") > 1e6);
    assert!(sample(&text, "process_open_fds") >= 3.0);
    assert!(sample(&text, "process_max_fds") >= sample(&text, "process_open_fds"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    let started = sample(&text, "process_start_time_seconds");
    assert!(started <= now + 2.0 && started > now - 3600.0, "{started}");

    match promtool(&text) {
        Some((ok, report)) => assert!(ok, "promtool check metrics reported:\n{report}\n{text}"),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("promtool is not installed (apt-get install -y prometheus); .ci/run installs it")
        }
        None => eprintln!("SKIPPED the promtool check: promtool is not installed"),
    }
}

#[tokio::test]
async fn prometheus_gets_openmetrics_declared_as_openmetrics() {
    let app = TestApp::open().await;
    app.get("/healthz", None).await;
    let r = app
        .client
        .get(app.url("/metrics"))
        .header("accept", PROMETHEUS_ACCEPT)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.headers()["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert_eq!(r.headers()["vary"], "accept");
    let text = r.text().await.unwrap();
    assert!(text.ends_with("# EOF\n"), "{text}");
    assert!(
        text.contains("# TYPE relay_http_requests counter\n"),
        "{text}"
    );
    assert!(text.contains("\nrelay_http_requests_total{"), "{text}");
    assert!(text.contains("\nprocess_cpu_seconds_total "), "{text}");
}
