//! The built-in `demo` provider: offline, deterministic, no key, so a fresh install answers.
//!
//! It shows the whole agent loop without a model: asked a question while a `list_dir` tool is
//! on offer, it calls that tool; given tool results, it sums them up; otherwise it says it is
//! a demo. The same request always gives the same events (no clock, no randomness, no sleeps).

use async_trait::async_trait;

use super::{
    ChatMessage, ChatRequest, EventStream, FinishReason, Provider, ProviderError, ProviderEvent,
    ToolCall, Usage,
};

pub const CANNED_ANSWER: &str = "This is Relay's built-in demo model: no provider is configured, \
so the answer is canned. Configure [[providers]] to talk to a real model.";

/// How much of each tool result's first line the summary quotes.
const FIRST_LINE_CHARS: usize = 80;

#[derive(Debug, Clone, Copy, Default)]
pub struct DemoProvider;

impl DemoProvider {
    pub fn new() -> Self {
        Self
    }

    /// The events a request gets, all at once (the stream just hands them out).
    pub fn respond(request: &ChatRequest) -> Vec<ProviderEvent> {
        let input_tokens = word_count(request);
        let last = request.messages.last();
        let offers_list_dir = request.tools.iter().any(|t| t.name == "list_dir");
        if offers_list_dir && matches!(last, Some(ChatMessage::User { .. })) {
            return vec![ProviderEvent::Finished {
                finish_reason: FinishReason::ToolCalls,
                tool_calls: vec![ToolCall {
                    id: "demo_call_1".to_owned(),
                    name: "list_dir".to_owned(),
                    arguments: r#"{"path":"."}"#.to_owned(),
                }],
                usage: Usage {
                    input_tokens,
                    output_tokens: 0,
                    cached_input_tokens: None,
                    cache_write_tokens: None,
                    reasoning_tokens: None,
                    server_tool_uses: None,
                },
            }];
        }
        let answer = match trailing_tool_results(&request.messages) {
            results if results.is_empty() => CANNED_ANSWER.to_owned(),
            results => summarise(&results),
        };
        let words = words(&answer);
        let output_tokens = words.len() as u64;
        let mut events: Vec<ProviderEvent> = words.into_iter().map(ProviderEvent::Text).collect();
        events.push(ProviderEvent::Finished {
            finish_reason: FinishReason::Stop,
            tool_calls: Vec::new(),
            usage: Usage {
                input_tokens,
                output_tokens,
                cached_input_tokens: None,
                cache_write_tokens: None,
                reasoning_tokens: None,
                server_tool_uses: None,
            },
        });
        events
    }
}

#[async_trait]
impl Provider for DemoProvider {
    fn kind(&self) -> &'static str {
        "demo"
    }

    async fn stream(&self, request: ChatRequest) -> Result<EventStream, ProviderError> {
        let events = Self::respond(&request);
        Ok(Box::pin(futures::stream::iter(events.into_iter().map(Ok))))
    }
}

/// The tool results at the end of the conversation, oldest first.
fn trailing_tool_results(messages: &[ChatMessage]) -> Vec<&str> {
    let mut results: Vec<&str> = messages
        .iter()
        .rev()
        .map_while(|m| match m {
            ChatMessage::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    results.reverse();
    results
}

fn summarise(results: &[&str]) -> String {
    let first_lines: Vec<String> = results
        .iter()
        .map(|r| {
            let line = r
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("(empty)");
            line.chars().take(FIRST_LINE_CHARS).collect()
        })
        .collect();
    format!(
        "The tool returned {} result(s). First lines: {}",
        results.len(),
        first_lines.join(" | ")
    )
}

/// The text cut after each run of whitespace: every word keeps its trailing space, and the
/// pieces put back together are the text exactly.
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut in_space = false;
    for c in text.chars() {
        if !c.is_whitespace() && in_space {
            out.push(std::mem::take(&mut current));
        }
        in_space = c.is_whitespace();
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// A rough token count: the words of the system text and of every message.
fn word_count(request: &ChatRequest) -> u64 {
    let system = request
        .system
        .iter()
        .chain(&request.notes)
        .map(String::as_str);
    let messages = request.messages.iter().map(|m| match m {
        ChatMessage::User { content }
        | ChatMessage::Assistant { content, .. }
        | ChatMessage::Tool { content, .. } => content.as_str(),
    });
    system
        .chain(messages)
        .map(|t| t.split_whitespace().count() as u64)
        .sum()
}
