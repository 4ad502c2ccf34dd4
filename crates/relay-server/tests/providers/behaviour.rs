//! Behaviour no fixture shows, driven by hand through each normaliser; and the demo provider.

use bytes::Bytes;
use futures::StreamExt;
use relay_server::providers::anthropic;
use relay_server::providers::demo::{self, DemoProvider};
use relay_server::providers::gemini;
use relay_server::providers::openai;
use relay_server::providers::{
    ChatMessage, ChatRequest, EventNormaliser, FinishReason, Provider, ProviderError,
    ProviderEvent, ToolCall, ToolSpec, Usage,
};
use serde_json::{Value, json};

use crate::resplit::split_everywhere;
use crate::{Adapter, Outcome, call, events, outcome};

// ---------------------------------------------------------------------------------------------
// Behaviour no fixture shows

#[test]
fn large_chunks_and_long_lines() {
    // One chunk holding a 10 kB line and then many small events, as a fast upstream delivers.
    let long = "x".repeat(10_000);
    let mut body =
        format!("data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{long}\"}}}}]}}\n\n");
    for i in 0..300 {
        body.push_str(&format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\" {i}\"}}}}]}}\n\n"
        ));
    }
    body.push_str(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n",
    );
    let expected: String = std::iter::once(long)
        .chain((0..300).map(|i| format!(" {i}")))
        .collect();
    for chunks in [
        vec![Bytes::from(body.clone())],
        vec![
            Bytes::from(body[..5000].to_owned()),
            Bytes::from(body[5000..].to_owned()),
        ],
    ] {
        let got = outcome(&events(Adapter::OpenAi, chunks));
        assert_eq!(got.text, expected);
        assert_eq!(finished(&got).0, FinishReason::Stop);
    }
}

#[test]
fn the_last_event_needs_no_blank_line() {
    // The body stops right after the JSON: no line end, no blank line, no [DONE].
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},",
        "\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":2}}",
    )
    .as_bytes();
    let got = outcome(&events(Adapter::OpenAi, vec![Bytes::copy_from_slice(body)]));
    let usage = Usage {
        input_tokens: 3,
        output_tokens: 2,
        cached_input_tokens: None,
        ..Default::default()
    };
    assert_eq!(
        got,
        Outcome {
            text: "Hi there".to_owned(),
            reasoning: String::new(),
            end: Ok((FinishReason::Stop, Vec::new(), usage)),
        }
    );
    split_everywhere(Adapter::OpenAi, body);
}

fn feed_all<N: EventNormaliser>(mut normaliser: N, events: &[(&str, &str)]) -> Outcome {
    let mut items = Vec::new();
    for (event, data) in events {
        match normaliser.feed(event, data) {
            Ok(out) => items.extend(out.into_iter().map(Ok)),
            Err(err) => {
                items.push(Err(err));
                return outcome(&items);
            }
        }
    }
    items.push(normaliser.finish());
    outcome(&items)
}

fn finished(outcome: &Outcome) -> &(FinishReason, Vec<ToolCall>, Usage) {
    outcome.end.as_ref().expect("a finished stream")
}

#[test]
fn openai_resent_call_is_one_call() {
    let got = feed_all(
        openai::Normaliser::new(),
        &[
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":"{\"pa"}}]}}]}"#,
            ),
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"arguments":"th\":\"a\"}"}}]}}]}"#,
            ),
            // The whole call again, as some servers send it when it is complete.
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","function":{"name":"read","arguments":"{\"path\":\"a\"}"}}]}}]}"#,
            ),
            (
                "",
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
            ),
        ],
    );
    let (reason, calls, _) = finished(&got);
    assert_eq!(*reason, FinishReason::ToolCalls);
    assert_eq!(calls, &[call("c1", "read", r#"{"path":"a"}"#)]);
}

#[test]
fn openai_calls_sharing_an_index_are_told_apart_by_id() {
    // Ollama and some proxies put every parallel call at index 0.
    let got = feed_all(
        openai::Normaliser::new(),
        &[
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"one","arguments":"{\"x\":1}"}}]}}]}"#,
            ),
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"b","function":{"name":"two"}}]}}]}"#,
            ),
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"y\":2}"}}]}}]}"#,
            ),
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"content":"after"},"finish_reason":"stop"}]}"#,
            ),
        ],
    );
    let (reason, calls, _) = finished(&got);
    // Calls were made, so the turn is a tool-call turn whatever finish_reason said.
    assert_eq!(*reason, FinishReason::ToolCalls);
    assert_eq!(
        calls,
        &[
            call("a", "one", r#"{"x":1}"#),
            call("b", "two", r#"{"y":2}"#)
        ]
    );
    assert_eq!(got.text, "after");
}

#[test]
fn a_call_cut_off_by_the_token_limit_is_dropped() {
    let got = feed_all(
        openai::Normaliser::new(),
        &[
            (
                "",
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"write","arguments":"{\"text\":\"unfinis"}}]}}]}"#,
            ),
            (
                "",
                r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#,
            ),
            ("", "[DONE]"),
        ],
    );
    assert_eq!(
        finished(&got),
        &(FinishReason::Length, Vec::new(), Usage::default())
    );
}

#[test]
fn a_stream_that_stops_early_is_a_protocol_error() {
    let openai = feed_all(
        openai::Normaliser::new(),
        &[("", r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)],
    );
    let anthropic = feed_all(
        anthropic::Normaliser::new(),
        &[
            (
                "message_start",
                r#"{"type":"message_start","message":{"usage":{"input_tokens":3}}}"#,
            ),
            (
                "content_block_delta",
                r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}"#,
            ),
        ],
    );
    let gemini = feed_all(
        gemini::Normaliser::new(),
        &[(
            "",
            r#"{"candidates":[{"content":{"parts":[{"text":"Hel"}],"role":"model"}}]}"#,
        )],
    );
    for got in [openai, anthropic, gemini] {
        assert_eq!(got.text, "Hel");
        assert!(
            matches!(got.end, Err(ProviderError::Protocol(_))),
            "{got:?}"
        );
    }
}

#[test]
fn invalid_json_is_a_protocol_error() {
    let got = feed_all(openai::Normaliser::new(), &[("", r#"{"choices": [{"#)]);
    assert!(
        matches!(got.end, Err(ProviderError::Protocol(_))),
        "{got:?}"
    );
    let got = feed_all(
        anthropic::Normaliser::new(),
        &[("message_start", "not json")],
    );
    assert!(
        matches!(got.end, Err(ProviderError::Protocol(_))),
        "{got:?}"
    );
    let got = feed_all(gemini::Normaliser::new(), &[("", "{\"candidates\": 3}")]);
    assert!(
        matches!(got.end, Err(ProviderError::Protocol(_))),
        "{got:?}"
    );
}

#[test]
fn in_stream_errors_name_their_type_and_a_sanitised_message() {
    let secret = "sk-test-SECRET";
    let anthropic_overloaded = feed_all(
        anthropic::Normaliser::new(),
        &[(
            "error",
            &format!(
                r#"{{"type":"error","error":{{"type":"overloaded_error","message":"Overloaded {secret}"}}}}"#
            ),
        )],
    );
    assert_eq!(
        anthropic_overloaded.end,
        Err(ProviderError::Status {
            status: 529,
            message: "overloaded_error".into(),
            detail: Some("Overloaded [redacted]".into()),
        })
    );
    let anthropic_rate = feed_all(
        anthropic::Normaliser::new(),
        &[(
            "error",
            r#"{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}"#,
        )],
    );
    assert_eq!(
        anthropic_rate.end,
        Err(ProviderError::RateLimited {
            retry_after: None,
            code: Some("rate_limit_error".into()),
            detail: Some("slow down".into()),
        })
    );
    let gemini = feed_all(
        gemini::Normaliser::new(),
        &[(
            "",
            &format!(
                r#"{{"error":{{"code":503,"message":"overloaded {secret}","status":"UNAVAILABLE"}}}}"#
            ),
        )],
    );
    assert_eq!(
        gemini.end,
        Err(ProviderError::Status {
            status: 503,
            message: "UNAVAILABLE".into(),
            detail: Some("overloaded [redacted]".into()),
        })
    );
    // An error code that is really a key is not repeated.
    let openai = feed_all(
        openai::Normaliser::new(),
        &[(
            "error",
            &format!(r#"{{"error":{{"message":"bad key {secret}","code":"{secret}"}}}}"#),
        )],
    );
    let err = openai.end.expect_err("an error");
    assert!(
        !err.to_string().contains("SECRET") && !format!("{err:?}").contains("SECRET"),
        "{err}"
    );
    for err in [&anthropic_overloaded.end, &gemini.end] {
        let err = err.as_ref().expect_err("an error");
        assert!(!err.to_string().contains("SECRET"), "{err}");
    }
}

#[test]
fn gemini_partial_args_build_nested_values() {
    let got = feed_all(
        gemini::Normaliser::new(),
        &[
            (
                "",
                r#"{"candidates":[{"content":{"parts":[{"functionCall":{"name":"edit","willContinue":true}}]}}]}"#,
            ),
            (
                "",
                r#"{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.file.path","stringValue":"src/","willContinue":true}],"willContinue":true}}]}}]}"#,
            ),
            (
                "",
                r#"{"candidates":[{"content":{"parts":[{"functionCall":{"partialArgs":[{"jsonPath":"$.file.path","stringValue":"main.rs"},{"jsonPath":"$.lines[1]","numberValue":7},{"jsonPath":"$.dry","boolValue":false},{"jsonPath":"$['odd key']","nullValue":"NULL_VALUE"}],"willContinue":true}}]}}]}"#,
            ),
            (
                "",
                r#"{"candidates":[{"content":{"parts":[{"functionCall":{}}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":6,"cachedContentTokenCount":2}}"#,
            ),
        ],
    );
    let (reason, calls, usage) = finished(&got);
    assert_eq!(*reason, FinishReason::ToolCalls);
    assert_eq!(calls.len(), 1);
    assert_eq!(
        (calls[0].id.as_str(), calls[0].name.as_str()),
        ("call_0", "edit")
    );
    let args: Value = serde_json::from_str(&calls[0].arguments).expect("JSON arguments");
    assert_eq!(
        args,
        json!({"file": {"path": "src/main.rs"}, "lines": [null, 7], "dry": false, "odd key": null})
    );
    assert_eq!(
        *usage,
        Usage {
            input_tokens: 5,
            output_tokens: 6,
            cached_input_tokens: Some(2),
            ..Default::default()
        }
    );
}

#[test]
fn gemini_call_resent_under_its_id_is_one_call() {
    let call_part = r#"{"candidates":[{"content":{"parts":[{"functionCall":{"id":"g1","name":"ls","args":{"path":"."}}}]}}]}"#;
    let got = feed_all(
        gemini::Normaliser::new(),
        &[
            ("", call_part),
            ("", call_part),
            (
                "",
                r#"{"candidates":[{"content":{"parts":[{"text":""}]},"finishReason":"STOP"}]}"#,
            ),
        ],
    );
    assert_eq!(finished(&got).1, [call("g1", "ls", r#"{"path":"."}"#)]);
}

#[test]
fn gemini_safety_stop_is_content_filter() {
    let got = feed_all(
        gemini::Normaliser::new(),
        &[(
            "",
            r#"{"candidates":[{"content":{"parts":[{"text":"I"}]},"finishReason":"SAFETY"}]}"#,
        )],
    );
    assert_eq!(finished(&got).0, FinishReason::ContentFilter);
    let got = feed_all(
        anthropic::Normaliser::new(),
        &[(
            "message_delta",
            r#"{"type":"message_delta","delta":{"stop_reason":"refusal"},"usage":{"output_tokens":1}}"#,
        )],
    );
    assert_eq!(finished(&got).0, FinishReason::ContentFilter);
}

#[test]
fn retryable_before_output() {
    let retryable = [
        ProviderError::Connect("connection failed".into()),
        ProviderError::RateLimited {
            retry_after: None,
            code: None,
            detail: None,
        },
        ProviderError::Status {
            status: 500,
            message: "x".into(),
            detail: None,
        },
        ProviderError::Status {
            status: 529,
            message: "overloaded_error".into(),
            detail: None,
        },
        ProviderError::Status {
            status: 408,
            message: "x".into(),
            detail: None,
        },
        ProviderError::Status {
            status: 409,
            message: "x".into(),
            detail: None,
        },
    ];
    let final_ = [
        ProviderError::Status {
            status: 400,
            message: "x".into(),
            detail: None,
        },
        ProviderError::Status {
            status: 401,
            message: "x".into(),
            detail: None,
        },
        ProviderError::Status {
            status: 404,
            message: "x".into(),
            detail: None,
        },
        ProviderError::Protocol("x".into()),
    ];
    for err in retryable {
        assert!(err.retryable_before_output(), "{err:?}");
    }
    for err in final_ {
        assert!(!err.retryable_before_output(), "{err:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// The demo provider

async fn demo(request: ChatRequest) -> Vec<ProviderEvent> {
    let stream = DemoProvider::new()
        .stream(request)
        .await
        .expect("the demo never fails");
    stream.map(|item| item.expect("no error")).collect().await
}

fn user(text: &str) -> ChatMessage {
    ChatMessage::User {
        content: text.to_owned(),
    }
}

#[tokio::test]
async fn demo_streams_its_canned_answer_word_by_word() {
    let request = ChatRequest {
        model: "demo".into(),
        system: Some("Notes: none".into()),
        messages: vec![user("hello there, model")],
        ..ChatRequest::default()
    };
    let events = demo(request.clone()).await;
    assert_eq!(events, demo(request).await, "deterministic");
    let (last, words) = events.split_last().expect("events");
    let words: Vec<&str> = words
        .iter()
        .map(|e| match e {
            ProviderEvent::Text(t) => t.as_str(),
            other => panic!("only text before the end: {other:?}"),
        })
        .collect();
    assert!(words.len() > 10, "several pieces: {words:?}");
    assert_eq!(words.concat(), demo::CANNED_ANSWER);
    assert!(
        words[..words.len() - 1]
            .iter()
            .all(|w| w.ends_with(' ') && !w.trim().is_empty())
    );
    assert_eq!(
        last,
        &ProviderEvent::Finished {
            finish_reason: FinishReason::Stop,
            tool_calls: Vec::new(),
            // 2 words of system text + 3 of the message; one output token per word streamed.
            usage: Usage {
                input_tokens: 5,
                output_tokens: words.len() as u64,
                cached_input_tokens: None,
                ..Default::default()
            },
        }
    );
}

#[tokio::test]
async fn demo_calls_list_dir_when_offered() {
    let request = ChatRequest {
        model: "demo".into(),
        messages: vec![user("what is in this project?")],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: "List a directory".into(),
            parameters: json!({"type": "object"}),
        }],
        ..ChatRequest::default()
    };
    assert_eq!(
        demo(request).await,
        [ProviderEvent::Finished {
            finish_reason: FinishReason::ToolCalls,
            tool_calls: vec![call("demo_call_1", "list_dir", r#"{"path":"."}"#)],
            usage: Usage {
                input_tokens: 5,
                output_tokens: 0,
                cached_input_tokens: None,
                ..Default::default()
            },
        }]
    );
}

#[tokio::test]
async fn demo_sums_up_tool_results() {
    let long_line = "x".repeat(100);
    let request = ChatRequest {
        model: "demo".into(),
        messages: vec![
            user("list it"),
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![call("demo_call_1", "list_dir", r#"{"path":"."}"#)],
            },
            ChatMessage::Tool {
                tool_call_id: "demo_call_1".into(),
                content: "Cargo.toml\nsrc/".into(),
            },
            ChatMessage::Tool {
                tool_call_id: "other".into(),
                content: long_line.clone(),
            },
        ],
        tools: vec![ToolSpec {
            name: "list_dir".into(),
            description: String::new(),
            parameters: json!({}),
        }],
        ..ChatRequest::default()
    };
    let events = demo(request).await;
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            ProviderEvent::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        format!(
            "The tool returned 2 result(s). First lines: Cargo.toml | {}",
            &long_line[..80]
        )
    );
    let Some(ProviderEvent::Finished {
        finish_reason,
        tool_calls,
        usage,
    }) = events.last()
    else {
        panic!("no finish: {events:?}");
    };
    assert_eq!((*finish_reason, tool_calls.len()), (FinishReason::Stop, 0));
    assert_eq!(usage.output_tokens, events.len() as u64 - 1);
    assert_eq!(usage.input_tokens, 5);
}
