//! The `openai_responses` adapter against every recorded Responses stream (OpenAI's,
//! llama.cpp's and LM Studio's), whole and re-split, plus its request mapping and one round
//! trip over real HTTP against a fake upstream serving the recorded bytes.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures::StreamExt;
use relay_server::providers::openai_responses::{self, Normaliser, OpenAiResponsesProvider};
use relay_server::providers::{
    ChatMessage, ChatRequest, FinishReason, Provider, ProviderError, ProviderEvent, ToolCall,
    ToolChoice, ToolSpec, Usage, sse,
};
use serde_json::{Value, json};

use crate::{Outcome, fixtures_dir, outcome};

/// A fixture as SSE bytes; `.chunks.txt` (one payload per line) is framed again, the payload's
/// `type` as the event name, as the servers send it.
fn sse_body(file: &str) -> Vec<u8> {
    let path = fixtures_dir().join(file);
    let raw = std::fs::read(&path).unwrap_or_else(|e| panic!("fixture {}: {e}", path.display()));
    if !file.ends_with(".chunks.txt") {
        return raw;
    }
    let mut out = String::new();
    for line in String::from_utf8(raw)
        .unwrap()
        .lines()
        .filter(|l| !l.trim().is_empty())
    {
        let value: Value = serde_json::from_str(line).unwrap();
        out.push_str(&format!(
            "event: {}\ndata: {line}\n\n",
            value["type"].as_str().unwrap()
        ));
    }
    out.into_bytes()
}

fn events(chunks: Vec<Bytes>) -> Vec<Result<ProviderEvent, ProviderError>> {
    let bytes = futures::stream::iter(chunks.into_iter().map(Ok::<_, Infallible>));
    futures::executor::block_on(sse::drive(bytes, Normaliser::default()).collect())
}

/// (id, name, arguments) of each expected call.
type Calls = &'static [(&'static str, &'static str, &'static str)];

/// (input, output, cached input) tokens.
/// Input, output, cached input, reasoning.
type TokenCounts = (u64, u64, Option<u64>, Option<u64>);

/// What the fake upstream saw: path, authorization header, body.
type Seen = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// What a fixture must produce, written by reading it. Long texts are checked by their start,
/// their end and their length in characters.
struct Case {
    file: &'static str,
    text: (&'static str, &'static str, usize),
    reasoning: (&'static str, usize),
    end: Result<(Calls, TokenCounts), (u16, &'static str)>,
}

const CASES: &[Case] = &[
    Case {
        file: "openai-responses/pydantic-ai__responses_stream.0.sse",
        text: ("", "", 0),
        reasoning: ("", 0),
        end: Ok((
            &[(
                "call_kL0PCQV7M2WMoVX8V8OtYSAL",
                "get_capital",
                "{\"country\":\"France\"}",
            )],
            (255, 16, Some(0), Some(0)),
        )),
    },
    Case {
        file: "openai-responses/pydantic-ai__responses_stream.1.sse",
        text: ("The capital of France is Paris.", "", 31),
        reasoning: ("", 0),
        end: Ok((&[], (278, 9, Some(0), Some(0)))),
    },
    Case {
        file: "openai-responses/pydantic-ai__responses_streaming_usage.0.sse",
        text: ("", "", 0),
        reasoning: ("", 0),
        end: Ok((
            &[(
                "call_CWXgs68YprAjp6t0371hiPOI",
                "final_result",
                "{\"result\":6666}",
            )],
            (53, 469, Some(0), Some(448)),
        )),
    },
    Case {
        file: "openai-responses/simonw-llm__responses_tool_use_streaming.0.sse",
        text: ("", "", 0),
        reasoning: ("", 0),
        end: Ok((
            &[(
                "call_sVidsfFJ6zlzRpelrPkTPlpd",
                "multiply",
                "{\"a\":1231,\"b\":2331}",
            )],
            (58, 23, Some(0), Some(0)),
        )),
    },
    Case {
        file: "openai-responses/simonw-llm__responses_tool_use_streaming.1.sse",
        text: ("1231 \u{d7} 2331 = **2,869,461**", "", 27),
        reasoning: ("", 0),
        end: Ok((&[], (94, 18, Some(0), Some(0)))),
    },
    Case {
        file: "openai-responses/vercel-ai__openai-error.1.chunks.txt",
        text: ("", "", 0),
        reasoning: ("", 0),
        end: Err((500, "insufficient_quota")),
    },
    Case {
        file: "openai-responses/vercel-ai__openai-reasoning-encrypted-content.1.chunks.txt",
        text: ("", "", 0),
        reasoning: (
            "**Calculating step-by-step using calculator**\n\nI'll compute 12 plus 7",
            163,
        ),
        end: Ok((
            &[(
                "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
                "calculator",
                "{\"a\":12,\"b\":7,\"op\":\"add\"}",
            )],
            (134, 28, Some(0), Some(0)),
        )),
    },
    Case {
        file: "local-llamacpp/responses_text.sse",
        text: ("Je suis le Joueur, je suis le Joueur de la France.", "", 50),
        reasoning: ("", 0),
        end: Ok((&[], (37, 20, Some(30), None))),
    },
    Case {
        file: "local-llamacpp/responses_tools.sse",
        text: ("", "", 0),
        reasoning: ("", 0),
        end: Ok((
            &[
                (
                    "call_zS3NDXl4juv80aZOEdhZHeXHnfTxcVTI",
                    "get_weather",
                    "{\"city\": \"Paris\"}",
                ),
                (
                    "call_NZD9LGPWujOjHO2qYYX8xpqy0Tr719cv",
                    "get_time",
                    "{\"city\": \"Taipei\"}",
                ),
            ],
            (286, 51, Some(285), None),
        )),
    },
    Case {
        file: "local-lmstudio/vercel-ai__lmstudio-basic.1.chunks.txt",
        text: (
            "## The Festival of Whispering Leaves",
            "connect with your roots through storytelling around fire",
            1384,
        ),
        reasoning: ("", 0),
        end: Ok((&[], (31, 282, Some(30), Some(0)))),
    },
    Case {
        file: "local-lmstudio/vercel-ai__lmstudio-tool-call.1.chunks.txt",
        text: (
            "I'll get the current weather information for San Francisco for you.",
            "",
            67,
        ),
        reasoning: ("The user is asking for the weather in San Francisco.", 242),
        end: Ok((
            &[(
                "call_2025306790300011",
                "weather",
                "{\"location\":\"San Francisco\"}",
            )],
            (182, 61, Some(2), Some(48)),
        )),
    },
];

fn check(case: &Case, got: &Outcome) {
    let f = case.file;
    assert!(
        got.text.starts_with(case.text.0) && got.text.ends_with(case.text.1),
        "{f}: text {:?}",
        got.text
    );
    assert_eq!(got.text.chars().count(), case.text.2, "{f}: text length");
    assert!(
        got.reasoning.starts_with(case.reasoning.0),
        "{f}: reasoning {:?}",
        got.reasoning
    );
    assert_eq!(
        got.reasoning.chars().count(),
        case.reasoning.1,
        "{f}: reasoning length"
    );
    match (&case.end, &got.end) {
        (Ok((calls, usage)), Ok((reason, got_calls, got_usage))) => {
            let expected: Vec<ToolCall> = calls
                .iter()
                .map(|(id, name, args)| ToolCall {
                    id: (*id).into(),
                    name: (*name).into(),
                    arguments: (*args).into(),
                })
                .collect();
            assert_eq!(got_calls, &expected, "{f}: calls");
            let want = if calls.is_empty() {
                FinishReason::Stop
            } else {
                FinishReason::ToolCalls
            };
            assert_eq!(*reason, want, "{f}: finish");
            assert_eq!(
                *got_usage,
                Usage {
                    input_tokens: usage.0,
                    output_tokens: usage.1,
                    cached_input_tokens: usage.2,
                    reasoning_tokens: usage.3,
                    ..Default::default()
                },
                "{f}: usage"
            );
        }
        (Err((status, message)), Err(e)) => {
            assert!(
                matches!(e, ProviderError::Status { status: s, message: m, .. } if s == status && m == message),
                "{f}: {e:?}"
            );
        }
        (want, got) => panic!("{f}: expected {want:?}, got {got:?}"),
    }
}

#[test]
fn every_recorded_responses_stream_gives_its_expected_outcome() {
    for case in CASES {
        check(
            case,
            &outcome(&events(vec![Bytes::from(sse_body(case.file))])),
        );
    }
}

#[test]
fn every_responses_fixture_is_in_the_table() {
    let mut files = Vec::new();
    for dir in ["openai-responses", "local-llamacpp", "local-lmstudio"] {
        for entry in std::fs::read_dir(fixtures_dir().join(dir)).unwrap() {
            let name = entry.unwrap().file_name().into_string().unwrap();
            let responses = dir != "local-llamacpp" || name.starts_with("responses_");
            if responses && (name.ends_with(".sse") || name.ends_with(".chunks.txt")) {
                files.push(format!("{dir}/{name}"));
            }
        }
    }
    files.sort();
    let mut listed: Vec<String> = CASES.iter().map(|c| c.file.to_owned()).collect();
    listed.sort();
    assert_eq!(files, listed);
}

/// Every split point for the raw recordings and the smaller framed ones; one byte per chunk for
/// all (split at every byte, the files of 15 KB and more take minutes on a debug build).
#[test]
fn responses_fixtures_survive_any_split() {
    std::thread::scope(|scope| {
        let handles: Vec<_> = CASES
            .iter()
            .map(|case| {
                scope.spawn(move || {
                    let body = sse_body(case.file);
                    let whole = events(vec![Bytes::from(body.clone())]);
                    if body.len() < 10_000 {
                        for at in 0..=body.len() {
                            let (a, b) = body.split_at(at);
                            let split =
                                events(vec![Bytes::copy_from_slice(a), Bytes::copy_from_slice(b)]);
                            assert_eq!(split, whole, "{}: split at byte {at}", case.file);
                        }
                    }
                    let bytewise = body.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
                    assert_eq!(events(bytewise), whole, "{}: one byte per chunk", case.file);
                })
            })
            .collect();
        for (case, handle) in CASES.iter().zip(handles) {
            assert!(handle.join().is_ok(), "{} changed when re-split", case.file);
        }
    });
}

#[test]
fn a_stream_cut_before_completion_is_a_protocol_error() {
    let body = sse_body("local-llamacpp/responses_text.sse");
    let text = String::from_utf8(body).unwrap();
    let cut = &text[..text.find("event: response.completed").unwrap()];
    let got = outcome(&events(vec![Bytes::from(cut.to_owned())]));
    assert!(
        matches!(got.end, Err(ProviderError::Protocol(_))),
        "{got:?}"
    );
}

fn round_trip_request() -> ChatRequest {
    ChatRequest {
        model: "gpt-5".into(),
        system: Some("Be brief.".into()),
        messages: vec![
            ChatMessage::User {
                content: "weather?".into(),
            },
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call_1".into(),
                    name: "weather".into(),
                    arguments: "{\"city\":\"Paris\"}".into(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "call_1".into(),
                content: "sunny".into(),
            },
        ],
        tools: vec![ToolSpec {
            name: "weather".into(),
            description: "Weather".into(),
            parameters: json!({"type": "object"}),
        }],
        max_tokens: Some(100),
        temperature: Some(0.2),
        stop: vec!["END".into()],
        tool_choice: Some(ToolChoice::Function("weather".into())),
        ..ChatRequest::default()
    }
}

#[test]
fn the_request_maps_instructions_items_and_function_tools() {
    let body = openai_responses::body(&round_trip_request());
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_output_tokens"], 100);
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user", "content": "weather?"},
            {"type": "function_call", "call_id": "call_1", "name": "weather", "arguments": "{\"city\":\"Paris\"}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}
        ])
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "weather", "description": "Weather", "parameters": {"type": "object"}}])
    );
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "weather"})
    );
    // The Responses API has no stop sequences; they are dropped rather than refused.
    assert!(body.get("stop").is_none(), "{body}");
}

#[tokio::test]
async fn the_adapter_posts_to_responses_with_the_key_and_reads_the_stream() {
    let seen: Seen = Arc::default();
    let recorded = sse_body("local-llamacpp/responses_tools.sse");
    let log = seen.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: Bytes| {
            let recorded = recorded.clone();
            let log = log.clone();
            async move {
                let auth = headers
                    .get("authorization")
                    .map(|v| v.to_str().unwrap().to_owned());
                log.lock().unwrap().push((
                    uri.path().to_owned(),
                    auth,
                    serde_json::from_slice(&body).unwrap(),
                ));
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(recorded))
                    .unwrap()
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let provider = OpenAiResponsesProvider::new(
        format!("http://{addr}/v1"),
        Some("sk-test".into()),
        std::sync::Arc::new(
            relay_server::providers::transport::lanes::Lanes::new(
                relay_server::providers::transport::lanes::ClientSettings::system().unwrap(),
                100,
            )
            .unwrap(),
        ),
    );
    assert_eq!(provider.kind(), "openai_responses");
    let items: Vec<_> = provider
        .stream(round_trip_request())
        .await
        .unwrap()
        .collect()
        .await;
    let got = outcome(&items);
    assert_eq!(got.end.unwrap().1.len(), 2);
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].0, "/v1/responses");
    assert_eq!(seen[0].1.as_deref(), Some("Bearer sk-test"));
    assert_eq!(seen[0].2["input"][2]["type"], "function_call_output");
}
