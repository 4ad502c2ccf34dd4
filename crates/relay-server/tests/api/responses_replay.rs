//! Every recorded Responses stream replayed through `POST /v1/responses` with an
//! `openai_responses` provider serving the recording: the client's answer carries the
//! recording's text, function calls, reasoning items (id, `encrypted_content`, summary) and usage
//! unchanged, streamed and not; and a second turn giving the reasoning back reaches the provider
//! with its `encrypted_content` byte for byte. Through `/v1/messages` the same reasoning is unsigned
//! thinking, never an Anthropic signature.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use relay_server::config::{ModelConfig, ProviderConfig, ProviderKind};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::compat::sse_events;
use crate::helpers::{TestApp, open_config};

/// Every recorded Responses stream.
const FIXTURES: &[&str] = &[
    "openai-responses/pydantic-ai__responses_stream.0.sse",
    "openai-responses/pydantic-ai__responses_stream.1.sse",
    "openai-responses/pydantic-ai__responses_streaming_usage.0.sse",
    "openai-responses/simonw-llm__responses_tool_use_streaming.0.sse",
    "openai-responses/simonw-llm__responses_tool_use_streaming.1.sse",
    "openai-responses/vercel-ai__openai-error.1.chunks.txt",
    "openai-responses/vercel-ai__openai-reasoning-encrypted-content.1.chunks.txt",
    "local-llamacpp/responses_text.sse",
    "local-llamacpp/responses_tools.sse",
    "local-lmstudio/vercel-ai__lmstudio-basic.1.chunks.txt",
    "local-lmstudio/vercel-ai__lmstudio-tool-call.1.chunks.txt",
];

fn fixture(file: &str) -> Vec<u8> {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// One recorded response: the bytes the fake provider sends, and its event payloads.
struct Recorded {
    body: Vec<u8>,
    events: Vec<Value>,
}

/// A fixture's responses. Raw SSE is served as recorded; `.chunks.txt` (one payload per line,
/// several responses one after another) is cut at each `response.created` and framed again.
fn recorded(file: &str) -> Vec<Recorded> {
    let raw = String::from_utf8(fixture(file)).unwrap();
    if !file.ends_with(".chunks.txt") {
        let events = raw
            .lines()
            .filter_map(|l| l.trim_end_matches('\r').strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).unwrap())
            .collect();
        return vec![Recorded {
            body: raw.into_bytes(),
            events,
        }];
    }
    let mut out: Vec<Recorded> = Vec::new();
    for line in raw.lines().filter(|l| !l.trim().is_empty()) {
        let value: Value = serde_json::from_str(line).unwrap();
        if value["type"] == "response.created" || out.is_empty() {
            out.push(Recorded {
                body: Vec::new(),
                events: Vec::new(),
            });
        }
        let last = out.last_mut().unwrap();
        let kind = value["type"].as_str().unwrap();
        last.body
            .extend(format!("event: {kind}\ndata: {line}\n\n").into_bytes());
        last.events.push(value);
    }
    out
}

/// The raw bodies the fake provider received.
pub type Seen = Arc<Mutex<Vec<Vec<u8>>>>;

/// A provider at `/v1/responses` answering each call with the next recorded body (the last one
/// again when they run out).
async fn provider(bodies: Vec<Vec<u8>>) -> (String, Seen) {
    let queue = Arc::new(Mutex::new(VecDeque::from(bodies)));
    let seen: Seen = Arc::default();
    let (q, s) = (queue.clone(), seen.clone());
    let app = axum::Router::new().route(
        "/v1/responses",
        axum::routing::post(move |body: axum::body::Bytes| {
            let (queue, seen) = (q.clone(), s.clone());
            async move {
                seen.lock().unwrap().push(body.to_vec());
                let mut queue = queue.lock().unwrap();
                let next = if queue.len() > 1 {
                    queue.pop_front().unwrap()
                } else {
                    queue.front().cloned().unwrap_or_default()
                };
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(axum::body::Body::from(next))
                    .unwrap()
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (format!("http://{addr}/v1"), seen)
}

/// A relay whose model `rsp` is an `openai_responses` provider serving `bodies`.
pub async fn relay(bodies: Vec<Vec<u8>>) -> (TestApp, Seen) {
    let (base_url, seen) = provider(bodies).await;
    let app = TestApp::spawn_with(|dir| {
        let mut c = open_config(dir);
        c.providers = vec![ProviderConfig {
            base_url: Some(base_url),
            ..ProviderConfig::new("rsp", ProviderKind::OpenaiResponses)
        }];
        c.models = vec![ModelConfig {
            name: "rsp".into(),
            provider: "rsp".into(),
            upstream: "gpt-test".into(),
            ..Default::default()
        }];
        c
    })
    .await;
    (app, seen)
}

/// A reasoning item: (id, encrypted_content, summary texts, content texts).
type Reasoning = (String, Option<String>, Vec<String>, Vec<String>);

/// What an answer is made of, compared field by field.
#[derive(Debug, PartialEq)]
struct Answer {
    text: String,
    /// (call_id, name, arguments)
    calls: Vec<(String, String, String)>,
    reasoning: Vec<Reasoning>,
    /// input, output, cached input, reasoning tokens
    usage: (u64, u64, u64, u64),
}

fn texts(parts: &Value) -> Vec<String> {
    parts
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| p["text"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// An answer from its output items and its usage object.
fn answer(items: &[Value], usage: &Value) -> Answer {
    let mut a = Answer {
        text: String::new(),
        calls: Vec::new(),
        reasoning: Vec::new(),
        usage: (
            usage["input_tokens"].as_u64().unwrap_or(0),
            usage["output_tokens"].as_u64().unwrap_or(0),
            usage["input_tokens_details"]["cached_tokens"]
                .as_u64()
                .unwrap_or(0),
            usage["output_tokens_details"]["reasoning_tokens"]
                .as_u64()
                .unwrap_or(0),
        ),
    };
    for item in items {
        match item["type"].as_str().unwrap() {
            "message" => a.text.push_str(&texts(&item["content"]).concat()),
            "function_call" => a.calls.push((
                item["call_id"].as_str().unwrap().to_owned(),
                item["name"].as_str().unwrap().to_owned(),
                item["arguments"].as_str().unwrap().to_owned(),
            )),
            "reasoning" => a.reasoning.push((
                item["id"].as_str().unwrap().to_owned(),
                item["encrypted_content"].as_str().map(str::to_owned),
                texts(&item["summary"]),
                texts(&item["content"]),
            )),
            other => panic!("unexpected output item {other}"),
        }
    }
    a
}

/// The items of `output_item.done` events, in order.
pub fn items_done(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .filter(|e| e["type"] == "response.output_item.done")
        .map(|e| e["item"].clone())
        .collect()
}

/// What the recording says the answer is.
fn expected(events: &[Value]) -> Answer {
    let completed = events
        .iter()
        .find(|e| e["type"] == "response.completed")
        .unwrap();
    answer(&items_done(events), &completed["response"]["usage"])
}

/// The client's request: the recording's function names offered as tools.
fn request(events: &[Value], stream: bool, input: Value) -> Value {
    let tools: Vec<Value> = items_done(events)
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| json!({"type": "function", "name": i["name"], "parameters": {"type": "object", "properties": {}}}))
        .collect();
    json!({"model": "rsp", "input": input, "stream": stream, "store": false,
        "include": ["reasoning.encrypted_content"], "reasoning": {"summary": "auto"}, "tools": tools})
}

pub fn parse(text: &str) -> Vec<Value> {
    sse_events(text)
        .into_iter()
        .map(|(_, d)| serde_json::from_str(&d).unwrap())
        .collect()
}

/// The streamed answer: what its `output_item.done` events carried, which must also be the
/// `output` of its one terminal `response.completed`.
async fn streamed(app: &TestApp, req: &Value) -> (Answer, Vec<Value>) {
    let res = app.post("/v1/responses", None, req).await;
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    let events = parse(&text);
    let terminal: Vec<&Value> = events
        .iter()
        .filter(|e| {
            e["type"].as_str().unwrap().starts_with("response.") && e["response"].is_object()
        })
        .filter(|e| e["type"] != "response.created" && e["type"] != "response.in_progress")
        .collect();
    assert_eq!(terminal.len(), 1, "{text}");
    assert_eq!(terminal[0]["type"], "response.completed", "{text}");
    let items = items_done(&events);
    // The provider's own stream reaches the client (issue 39); OpenAI encrypts a reasoning item's
    // content afresh each time it sends the item, so that field may differ between the two.
    let unsealed = |v: &Value| {
        let mut v = v.clone();
        for item in v.as_array_mut().into_iter().flatten() {
            if let Some(item) = item.as_object_mut() {
                item.remove("encrypted_content");
            }
        }
        v
    };
    assert_eq!(
        unsealed(&Value::Array(items.clone())),
        unsealed(&terminal[0]["response"]["output"]),
        "{text}"
    );
    (answer(&items, &terminal[0]["response"]["usage"]), items)
}

#[tokio::test]
async fn every_recorded_responses_stream_reaches_the_client_unchanged() {
    let mut reasoning_items = 0;
    let mut encrypted = 0;
    let mut calls = 0;
    for file in FIXTURES {
        for (n, rec) in recorded(file).into_iter().enumerate() {
            let failed = rec
                .events
                .iter()
                .any(|e| e["type"] == "error" || e["type"] == "response.failed");
            let (app, _) = relay(vec![rec.body.clone()]).await;
            if failed {
                // The provider's error comes before any output: the client gets OpenAI's error
                // shape, streamed or not, and never a `response.completed`.
                let req = request(&rec.events, true, json!("hi"));
                let res = app.post("/v1/responses", None, &req).await;
                let status = res.status();
                let text = res.text().await.unwrap();
                assert!(!text.contains("response.completed"), "{file}: {text}");
                assert!(
                    status.is_client_error()
                        || status.is_server_error()
                        || text.contains("response.failed"),
                    "{file}: {status} {text}"
                );
                continue;
            }
            let want = expected(&rec.events);
            assert!(
                !want.text.is_empty() || !want.calls.is_empty(),
                "{file} #{n}: an empty recording"
            );
            reasoning_items += want.reasoning.len();
            encrypted += want.reasoning.iter().filter(|r| r.1.is_some()).count();
            calls += want.calls.len();
            let req = request(&rec.events, true, json!("hi"));
            let (got, _) = streamed(&app, &req).await;
            assert_eq!(got, want, "{file} #{n}, streamed");
            // Byte for byte: the recording is what the client read.
            let text = app
                .post("/v1/responses", None, &req)
                .await
                .text()
                .await
                .unwrap();
            assert_eq!(text.as_bytes(), &rec.body[..], "{file} #{n}, bytes");
            let req = request(&rec.events, false, json!("hi"));
            let res = app.post("/v1/responses", None, &req).await;
            assert_eq!(res.status(), StatusCode::OK, "{file} #{n}");
            let whole: Value = res.json().await.unwrap();
            let output = whole["output"].as_array().unwrap();
            assert_eq!(answer(output, &whole["usage"]), want, "{file} #{n}, whole");
        }
    }
    // The recordings hold three reasoning items (two with encrypted content, one with LM
    // Studio's reasoning content) and calls: none of it was skipped.
    assert_eq!((reasoning_items, encrypted), (3, 2));
    assert!(calls >= 6, "{calls}");
}

#[tokio::test]
async fn a_reasoning_item_streams_under_the_providers_id_with_its_summary_events() {
    let file = "openai-responses/vercel-ai__openai-reasoning-encrypted-content.1.chunks.txt";
    let rec = recorded(file).remove(0);
    let (app, _) = relay(vec![rec.body.clone()]).await;
    let req = request(&rec.events, true, json!("hi"));
    let text = app
        .post("/v1/responses", None, &req)
        .await
        .text()
        .await
        .unwrap();
    let events = parse(&text);
    let id = "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9";
    let of_item: Vec<&str> = events
        .iter()
        .filter(|e| e["item_id"] == id || e["item"]["id"] == id)
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert_eq!(of_item.first(), Some(&"response.output_item.added"));
    assert_eq!(of_item[1], "response.reasoning_summary_part.added");
    assert_eq!(of_item[2], "response.reasoning_summary_text.delta");
    assert_eq!(
        of_item[of_item.len() - 3..],
        [
            "response.reasoning_summary_text.done",
            "response.reasoning_summary_part.done",
            "response.output_item.done"
        ]
    );
    let done = events
        .iter()
        .find(|e| e["type"] == "response.reasoning_summary_text.done")
        .unwrap();
    assert!(
        done["text"]
            .as_str()
            .unwrap()
            .starts_with("**Calculating step-by-step")
    );
    // The item is the provider's: its final encrypted content, not the one it opened with.
    let item = &items_done(&events)[0];
    assert!(
        item["encrypted_content"]
            .as_str()
            .unwrap()
            .starts_with("gAAAAABpPDIVOKrsHNZ0")
    );
    let sequence: Vec<u64> = events
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert!(sequence.windows(2).all(|w| w[1] == w[0] + 1));
}

#[tokio::test]
async fn the_next_turn_gives_the_reasoning_back_to_the_provider_byte_for_byte() {
    let file = "openai-responses/vercel-ai__openai-reasoning-encrypted-content.1.chunks.txt";
    let recs = recorded(file);
    let (app, seen) = relay(recs.iter().map(|r| r.body.clone()).collect()).await;
    let user = json!({"type": "message", "role": "user",
        "content": [{"type": "input_text", "text": "12 + 7, times 3, times 10"}]});
    let (first, items) = streamed(&app, &request(&recs[0].events, true, json!([user]))).await;
    assert_eq!(first, expected(&recs[0].events));
    let encrypted = first.reasoning[0].1.clone().unwrap();
    // Codex's second turn: the whole conversation, the answer's items as they came, the result.
    let mut input = vec![user];
    input.extend(items);
    input.push(json!({"type": "function_call_output",
        "call_id": first.calls[0].0, "output": "19"}));
    let (second, _) = streamed(&app, &request(&recs[1].events, true, json!(input))).await;
    assert_eq!(second, expected(&recs[1].events));
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2);
    let sent: Value = serde_json::from_slice(&seen[1]).unwrap();
    let reasoning: Vec<&Value> = sent["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "reasoning")
        .collect();
    assert_eq!(reasoning.len(), 1, "{sent}");
    assert_eq!(
        reasoning[0]["id"],
        "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9"
    );
    assert_eq!(reasoning[0]["encrypted_content"], encrypted.as_str());
    let quoted = serde_json::to_string(&encrypted).unwrap();
    let raw = String::from_utf8(seen[1].clone()).unwrap();
    assert!(
        raw.contains(&quoted),
        "the encrypted content changed on the way"
    );
    assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
    assert_eq!(sent["model"], "gpt-test");
}

#[tokio::test]
async fn an_openai_reasoning_item_never_becomes_an_anthropic_signature() {
    let file = "openai-responses/vercel-ai__openai-reasoning-encrypted-content.1.chunks.txt";
    let rec = recorded(file).remove(0);
    let encrypted = expected(&rec.events).reasoning[0].1.clone().unwrap();
    let (app, _) = relay(vec![rec.body.clone()]).await;
    let tools =
        json!([{"name": "calculator", "input_schema": {"type": "object", "properties": {}}}]);
    let req = json!({"model": "rsp", "max_tokens": 100, "stream": true, "tools": tools,
        "messages": [{"role": "user", "content": "12 + 7"}]});
    let res = app.post("/v1/messages", None, &req).await;
    assert_eq!(res.status(), StatusCode::OK);
    let text = res.text().await.unwrap();
    // The summary streams as thinking, unsigned: a later turn to Anthropic drops it.
    assert!(text.contains("thinking_delta"), "{text}");
    assert!(!text.contains("signature_delta"), "{text}");
    assert!(!text.contains(&encrypted[..40]), "{text}");
    let mut whole_req = req.clone();
    whole_req["stream"] = json!(false);
    let whole: Value = app
        .post("/v1/messages", None, &whole_req)
        .await
        .json()
        .await
        .unwrap();
    let thinking: Vec<&Value> = whole["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "thinking")
        .collect();
    assert_eq!(thinking.len(), 1, "{whole}");
    assert_eq!(thinking[0]["signature"], "");
    assert!(!whole.to_string().contains(&encrypted[..40]));
}
