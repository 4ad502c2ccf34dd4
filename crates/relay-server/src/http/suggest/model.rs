//! Suggestions from the configured `[routing] suggest` model, under a hard deadline.
//!
//! The model sees the partial line, the working directory and the last few commands (with secrets
//! redacted). A late, malformed, multi-line, non-extending or unsafe answer gives no suggestion.

use std::time::Duration;

use futures::StreamExt;
use relay_safety as safety;

use super::acceptable;
use crate::providers::registry::ModelEntry;
use crate::providers::{ChatMessage, ChatRequest, ProviderEvent};

/// How many of the newest commands the model sees.
const CONTEXT_COMMANDS: usize = 10;

const SYSTEM: &str = "You complete shell command lines in a developer's terminal. Reply with exactly one \
line: the complete command line, starting with exactly the characters the user typed, with nothing \
before or after it (no quotes, no code fences, no explanation). Never propose destructive or privileged \
commands. If you are not confident, reply with the typed characters unchanged.";

pub async fn complete(
    entry: &ModelEntry,
    partial: &str,
    cwd: &str,
    recent: &[String],
    deadline: Duration,
) -> Option<String> {
    let skip = recent.len().saturating_sub(CONTEXT_COMMANDS);
    let history: Vec<String> = recent[skip..]
        .iter()
        .map(|l| safety::redact_secrets(l))
        .collect();
    let prompt = format!(
        "Working directory: {}\nRecent commands, oldest first:\n{}\nTyped so far: {}",
        safety::redact_secrets(cwd),
        if history.is_empty() {
            "(none)".to_owned()
        } else {
            history.join("\n")
        },
        safety::redact_secrets(partial)
    );
    let request = ChatRequest {
        model: entry.upstream.clone(),
        system: Some(SYSTEM.to_owned()),
        messages: vec![ChatMessage::User { content: prompt }],
        tools: Vec::new(),
        max_tokens: Some(96),
        temperature: Some(0.0),
        ..ChatRequest::default()
    };
    let answer = tokio::time::timeout(deadline, async {
        let mut events = entry.provider.stream(request).await.ok()?;
        let mut text = String::new();
        while let Some(event) = events.next().await {
            match event.ok()? {
                ProviderEvent::Text(t) => {
                    text.push_str(&t);
                    if text.len() > 4 * super::MAX_SUGGESTION_BYTES {
                        return None;
                    }
                }
                ProviderEvent::Reasoning(_)
                | ProviderEvent::ReasoningSignature(_)
                | ProviderEvent::RedactedReasoning(_)
                | ProviderEvent::ReasoningItem(_)
                | ProviderEvent::UsageSoFar(_)
                | ProviderEvent::Raw(_) => {}
                ProviderEvent::Finished { .. } => return Some(text),
            }
        }
        None
    })
    .await
    .ok()??;
    // Tolerate one trailing newline; anything else multi-line is refused.
    let line = answer
        .strip_suffix('\n')
        .unwrap_or(&answer)
        .trim_end_matches(' ');
    if line.contains('\n') || line.contains('\r') {
        return None;
    }
    acceptable(partial, line).then(|| line.to_owned())
}
