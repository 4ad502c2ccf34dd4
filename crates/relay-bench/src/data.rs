//! The workload: coding-style notes, questions about them, a shell history, and the request bodies,
//! all generated from a fixed seed so every run sends the same bytes.

use serde_json::{Value, json};

/// The project every benchmark leg and note belongs to.
pub const PROJECT: &str = "bench-project";
/// The model the mock answers at once, and the one whose answer never ends (open-stream test).
pub const FAST_MODEL: &str = "bench-fast";
pub const SLOW_MODEL: &str = "bench-slow";

/// A small deterministic generator (xorshift64*): no dependency, same sequence on every machine.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// One element of a non-empty slice.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        let len = u64::try_from(items.len()).unwrap_or(u64::MAX).max(1);
        let i = usize::try_from(self.next_u64() % len).unwrap_or(0);
        items.get(i).copied().unwrap_or_default()
    }
}

const AREAS: &[&str] = &[
    "billing",
    "auth",
    "search",
    "payments",
    "notifications",
    "ingest",
    "scheduler",
    "gateway",
    "reports",
    "exports",
    "webhooks",
    "sessions",
    "invoices",
    "uploads",
    "metrics",
    "audit",
    "inventory",
    "checkout",
    "profiles",
    "catalog",
];
const CRATES: &[&str] = &[
    "sqlx",
    "tokio",
    "axum",
    "serde",
    "reqwest",
    "tracing",
    "clap",
    "thiserror",
    "anyhow",
    "tower",
    "hyper",
    "rustls",
    "chrono",
    "uuid",
    "regex",
    "rayon",
    "bytes",
    "prost",
];
const PURPOSES: &[&str] = &[
    "retries",
    "connection pooling",
    "JSON parsing",
    "rate limiting",
    "logging",
    "config loading",
    "error mapping",
    "request tracing",
    "date handling",
    "id generation",
    "TLS",
    "background jobs",
];
const THINGS: &[&str] = &[
    "timeout",
    "pool size",
    "API key",
    "batch size",
    "page limit",
    "cache TTL",
    "queue depth",
    "retry budget",
    "lock timeout",
    "feature flag",
];
const KINDS: &[&str] = &["unit", "integration", "e2e", "lint", "migrate", "bench"];
const FUNCS: &[&str] = &[
    "fetch_optional",
    "try_join_all",
    "spawn_blocking",
    "select_all",
    "timeout_at",
    "from_slice",
    "bounded_channel",
    "with_capacity",
    "retain_recent",
    "split_once",
];

/// The `i`-th note: one of several coding-note shapes, unique by its trailing counter.
pub fn note(rng: &mut Rng, i: usize) -> String {
    let area = rng.pick(AREAS);
    let krate = rng.pick(CRATES);
    let purpose = rng.pick(PURPOSES);
    let thing = rng.pick(THINGS);
    let kind = rng.pick(KINDS);
    let func = rng.pick(FUNCS);
    let other = rng.pick(FUNCS);
    let text = match rng.next_u64() % 8 {
        0 => format!(
            "Run `cargo test -p {area}-core` before pushing changes to the {area} module; the {kind} suite catches schema drift."
        ),
        1 => format!(
            "The {area} service reads its {thing} from config/{area}.toml; never hard-code the {thing} in handlers."
        ),
        2 => format!(
            "Database migrations for {area} live in migrations/{area}/ and run with `sqlx migrate run` against the staging copy first."
        ),
        3 => format!(
            "Use the {krate} crate for {purpose} in {area}; the hand-written {purpose} helper was removed."
        ),
        4 => format!(
            "{area} {kind} tests need PostgreSQL on 127.0.0.1:5432 and Redis on 6379; start both before `make test`."
        ),
        5 => format!(
            "Prefer `{func}` over `{other}` in {area} handlers: it keeps the {thing} bounded under load."
        ),
        6 => format!(
            "Decision: {area} errors map to HTTP 4xx with a JSON body naming the field; {krate} errors become 503."
        ),
        _ => format!(
            "The CI job `{area}-{kind}` is flaky when the {thing} expires; rerun once before investigating {area}."
        ),
    };
    format!("{text} (ref {i})")
}

/// A question a developer might ask, in the notes' vocabulary, so injection has work to do.
pub fn question(rng: &mut Rng) -> String {
    let area = rng.pick(AREAS);
    let krate = rng.pick(CRATES);
    let purpose = rng.pick(PURPOSES);
    let thing = rng.pick(THINGS);
    let kind = rng.pick(KINDS);
    match rng.next_u64() % 6 {
        0 => format!("How do I run the {area} {kind} tests locally?"),
        1 => format!("Where do the {area} database migrations live and how are they applied?"),
        2 => format!("Why does the {area}-{kind} CI job keep failing on the {thing}?"),
        3 => format!("Which crate should the {area} module use for {purpose}? Is {krate} fine?"),
        4 => format!("Where is the {thing} for the {area} service configured?"),
        _ => format!(
            "Refactor the {area} handlers to map {krate} errors properly and add {purpose}."
        ),
    }
}

const HISTORY: &[&str] = &[
    "git status",
    "git diff --stat",
    "cargo build",
    "cargo clippy --all-targets -- -D warnings",
    "ls -la",
    "cd crates/relay-server",
    "cd ../..",
    "rg \"TODO\" src/",
    "vim src/main.rs",
    "git add -p",
    "git commit -m \"wip\"",
    "kubectl get pods -n staging",
    "docker ps",
    "make check",
    "cat Cargo.toml",
    "git log --oneline -10",
    "cargo fmt --check",
    "tail -f relay-data/relay.log",
    "curl -s localhost:7711/healthz",
    "git checkout -b feature/bench",
];

/// A `/v1/suggest` body: ~200 recent lines, with the line that completes `partial` in the middle,
/// so the history scan walks half the list before it finds it.
pub fn suggest_body(lines: usize) -> Value {
    let mut rng = Rng::new(7);
    let mut recent: Vec<String> = (0..lines).map(|_| rng.pick(HISTORY).to_owned()).collect();
    let middle = lines / 2;
    if let Some(slot) = recent.get_mut(middle) {
        "cargo test -p relay-server --test api".clone_into(slot);
    }
    json!({"partial": "cargo test -p rel", "cwd": "/home/dev/bench-project", "recent": recent})
}

/// The question every load-test leg asks (one body for the whole run, as oha sends one body).
pub const LEG_QUESTION: &str =
    "How do I run the billing integration tests locally, and where is the timeout configured?";

fn tool_def() -> Value {
    json!({
        "name": "read_file",
        "description": "Read a file of the workspace",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    })
}

/// The project of the open-stream test: no notes, so opening thousands of legs measures the
/// streams and not note search.
pub const STREAMS_PROJECT: &str = "bench-streams";

/// An agent leg for Relay: one user message, one tool, in `project` (its notes are injected).
pub fn relay_leg(model: &str, project: &str) -> Value {
    json!({
        "model": model,
        "project_id": project,
        "cwd": "/home/dev/bench-project",
        "messages": [{"role": "user", "content": LEG_QUESTION}],
        "tools": [tool_def()],
    })
}

/// The same leg as an OpenAI Chat Completions request, for the mock directly and for LiteLLM.
pub fn openai_leg(model: &str) -> Value {
    let tool = tool_def();
    json!({
        "model": model,
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [
            {"role": "system", "content": "You are a coding assistant."},
            {"role": "user", "content": LEG_QUESTION},
        ],
        "tools": [{"type": "function", "function": tool}],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generation_is_deterministic_and_notes_unique() {
        let mut a = Rng::new(1);
        let mut b = Rng::new(1);
        let na: Vec<String> = (0..50).map(|i| note(&mut a, i)).collect();
        let nb: Vec<String> = (0..50).map(|i| note(&mut b, i)).collect();
        assert_eq!(na, nb);
        let unique: std::collections::HashSet<_> = na.iter().collect();
        assert_eq!(unique.len(), na.len());
    }

    #[test]
    fn suggest_body_has_the_completion_in_the_middle() {
        let body = suggest_body(200);
        let recent = body["recent"].as_array().unwrap();
        assert_eq!(recent.len(), 200);
        assert_eq!(recent[100], "cargo test -p relay-server --test api");
    }
}
