//! The pane tools (rules 7-8) on tmux: inside tmux (`$TMUX` set) open_pane splits right or down,
//! or opens a window for `tab` (and for any unknown layout); spawn_agent starts `relay agent --role
//! worker` on the task in a new pane; send_keys/send_agent type into a pane; read_pane/read_agent
//! capture its text; list_panes numbers them. A pane's number is tmux's pane id without the `%`,
//! which stays the same across windows. Outside tmux each returns a clear error.

use std::process::Stdio;

use anyhow::Context;
use serde_json::Value;

use super::{Ctx, cap_text, opt_int, opt_str, str_arg};

const CAPTURE_CAP: usize = 16 * 1024;

async fn tmux(args: &[&str]) -> anyhow::Result<String> {
    let out = tokio::process::Command::new("tmux")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run tmux")?;
    if !out.status.success() {
        anyhow::bail!(
            "tmux {} failed: {}",
            args.first().unwrap_or(&""),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Quotes `s` for a POSIX shell: tmux hands a pane's command to the shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

fn target(args: &Value) -> anyhow::Result<String> {
    let pane = opt_int(args, "pane")?.context("missing the integer argument `pane`")?;
    Ok(format!("%{pane}"))
}

/// Opens a pane running `command` (a shell when `None`) and returns its number.
async fn open(
    ctx: &Ctx,
    layout: &str,
    command: Option<&str>,
    env: &[String],
) -> anyhow::Result<String> {
    let root = ctx.project.root_str();
    let mut args: Vec<&str> = match layout {
        "right" => vec!["split-window", "-h"],
        "down" => vec!["split-window", "-v"],
        _ => vec!["new-window"],
    };
    args.extend(["-P", "-F", "#{pane_id}", "-c", &root]);
    for e in env {
        args.extend(["-e", e]);
    }
    if let Some(c) = command {
        args.push(c);
    }
    let id = tmux(&args).await?;
    Ok(id.trim().trim_start_matches('%').to_owned())
}

/// Types `text`; each newline becomes an Enter key.
async fn send(target: &str, text: &str, submit: bool) -> anyhow::Result<()> {
    let mut parts = text.split('\n').peekable();
    while let Some(part) = parts.next() {
        if !part.is_empty() {
            tmux(&["send-keys", "-t", target, "-l", part]).await?;
        }
        let last = parts.peek().is_none();
        if !last || (submit && !part.is_empty()) {
            tmux(&["send-keys", "-t", target, "Enter"]).await?;
        }
    }
    Ok(())
}

pub async fn run(ctx: &Ctx, name: &str, args: &Value) -> anyhow::Result<String> {
    if std::env::var_os("TMUX").is_none_or(|t| t.is_empty()) {
        anyhow::bail!(
            "{name} needs tmux: relay is not running inside a tmux session ($TMUX is not set). \
             Ask the user to start relay inside tmux to use panes."
        );
    }
    match name {
        "open_pane" => {
            let layout = str_arg(args, "layout")?;
            let n = open(ctx, layout, opt_str(args, "command"), &[]).await?;
            Ok(format!("opened pane {n}"))
        }
        "spawn_agent" => {
            let layout = str_arg(args, "layout")?;
            let task = str_arg(args, "task")?;
            let exe = std::env::current_exe().context("cannot find the relay executable")?;
            let mut line = format!(
                "{} agent --role worker --server {}",
                shell_quote(&exe.display().to_string()),
                shell_quote(&ctx.server)
            );
            if let Some(model) = opt_str(args, "model") {
                line.push_str(&format!(" --model {}", shell_quote(model)));
            }
            line.push_str(&format!(" -- {}", shell_quote(task)));
            // A token given by environment reaches the worker the same way; a stored one it finds itself.
            let env: Vec<String> = std::env::var("RELAY_TOKEN")
                .ok()
                .map(|t| format!("RELAY_TOKEN={t}"))
                .into_iter()
                .collect();
            let n = open(ctx, layout, Some(&line), &env).await?;
            Ok(format!("started a worker agent in pane {n}"))
        }
        "send_keys" => {
            let t = target(args)?;
            send(&t, str_arg(args, "text")?, false).await?;
            Ok(format!("typed into pane {}", t.trim_start_matches('%')))
        }
        "send_agent" => {
            let t = target(args)?;
            send(&t, str_arg(args, "text")?, true).await?;
            Ok(format!(
                "sent to the agent in pane {}",
                t.trim_start_matches('%')
            ))
        }
        "read_pane" | "read_agent" => {
            let t = target(args)?;
            let text = tmux(&["capture-pane", "-p", "-J", "-t", &t, "-S", "-200"]).await?;
            let text = text.trim_end();
            Ok(cap_text(
                if text.is_empty() {
                    "(the pane is empty)"
                } else {
                    text
                },
                CAPTURE_CAP,
                "pane text",
            ))
        }
        "list_panes" => {
            let list = tmux(&[
                "list-panes",
                "-a",
                "-F",
                "pane #{pane_id}: window #{window_index}, running #{pane_current_command}",
            ])
            .await?;
            Ok(list.replace("pane %", "pane ").trim_end().to_owned())
        }
        other => anyhow::bail!("unknown pane tool `{other}`"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_survives_single_quotes() {
        assert_eq!(shell_quote("it's"), r"'it'\''s'");
    }
}
