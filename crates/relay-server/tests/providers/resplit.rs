//! Re-splitting: the chunking of the bytes never changes the events.

use bytes::Bytes;
use relay_server::providers::{FinishReason, Usage};

use crate::cases::{CASES, Case};
use crate::{Adapter, Outcome, events, outcome, sse_body};

// ---------------------------------------------------------------------------------------------
// Re-splitting: the chunking of the bytes never changes the events

pub(crate) fn split_everywhere(adapter: Adapter, body: &[u8]) {
    let whole = events(adapter, vec![Bytes::copy_from_slice(body)]);
    for at in 0..=body.len() {
        let (a, b) = body.split_at(at);
        let split = events(
            adapter,
            vec![Bytes::copy_from_slice(a), Bytes::copy_from_slice(b)],
        );
        assert_eq!(split, whole, "split at byte {at}");
    }
    let bytewise = body.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
    assert_eq!(events(adapter, bytewise), whole, "one byte per chunk");
}

#[test]
fn raw_sse_fixtures_survive_any_split() {
    // Each fixture on its own thread: this is the slow test, and the machine has two cores.
    let raw: Vec<&Case> = CASES
        .iter()
        .filter(|c| !c.file.ends_with(".chunks.txt"))
        .collect();
    std::thread::scope(|scope| {
        let handles: Vec<_> = raw
            .iter()
            .map(|case| {
                scope.spawn(move || {
                    split_everywhere(case.adapter, &sse_body(case.file, case.adapter))
                })
            })
            .collect();
        for (case, handle) in raw.iter().zip(handles) {
            if handle.join().is_err() {
                panic!("{} changed when re-split", case.file);
            }
        }
    });
}

#[test]
fn crlf_and_utf8_split_between_chunks() {
    // CRLF framing (as Gemini sends it) with a multi-byte character in every event.
    let body = concat!(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Voil\u{e0} \"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\u{1f389} f\u{ea}te\"}}]}\r\n\r\n",
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n",
        "data: [DONE]\r\n\r\n",
    )
    .as_bytes();
    let expected = Outcome {
        text: "Voil\u{e0} \u{1f389} f\u{ea}te".to_owned(),
        reasoning: String::new(),
        end: Ok((FinishReason::Stop, Vec::new(), Usage::default())),
    };
    // The cuts: between the CR and LF ending the first data line, inside `à` (2 bytes), and
    // after the first two of the emoji's four bytes.
    let cr = body.iter().position(|b| *b == b'\r').expect("a CR");
    let a_grave = body
        .windows(2)
        .position(|w| w == "\u{e0}".as_bytes())
        .expect("à")
        + 1;
    let emoji = body
        .windows(4)
        .position(|w| w == "\u{1f389}".as_bytes())
        .expect("🎉")
        + 2;
    let mut cuts = vec![a_grave, cr + 1, emoji];
    cuts.sort_unstable();
    let mut chunks = Vec::new();
    let mut start = 0;
    for cut in cuts {
        chunks.push(Bytes::copy_from_slice(&body[start..cut]));
        start = cut;
    }
    chunks.push(Bytes::copy_from_slice(&body[start..]));
    assert_eq!(outcome(&events(Adapter::OpenAi, chunks)), expected);
    split_everywhere(Adapter::OpenAi, body);

    // Lines ended by a lone CR are SSE too; the stream's end flushes the last one.
    let cr_only = String::from_utf8(body.to_vec())
        .expect("UTF-8")
        .replace("\r\n", "\r");
    let cr_only = cr_only.trim_end_matches('\r').as_bytes();
    assert_eq!(
        outcome(&events(
            Adapter::OpenAi,
            vec![Bytes::copy_from_slice(cr_only)]
        )),
        expected
    );
    split_everywhere(Adapter::OpenAi, cr_only);
}

/// Driven for a client of the provider's own API (`sse::drive_raw`): every byte of the body is
/// in exactly one `Raw` item, in order, each ahead of the events made from it, and the other
/// events are those of the plain driver.
fn raw_concatenation(adapter: Adapter, chunks: Vec<Bytes>) -> (Vec<u8>, Vec<String>) {
    use futures::StreamExt;
    use relay_server::providers::{ProviderEvent, anthropic, gemini, openai, sse};
    let bytes = futures::stream::iter(chunks.into_iter().map(Ok::<_, std::convert::Infallible>));
    let max = sse::DEFAULT_MAX_EVENT_BYTES;
    let stream = match adapter {
        Adapter::OpenAi => sse::drive_raw(bytes, max, openai::Normaliser::new()),
        Adapter::Anthropic => sse::drive_raw(bytes, max, anthropic::Normaliser::new()),
        Adapter::Gemini => sse::drive_raw(bytes, max, gemini::Normaliser::new()),
    };
    let items: Vec<_> = futures::executor::block_on(stream.collect());
    let mut raw = Vec::new();
    let mut rest = Vec::new();
    for item in items {
        match item {
            Ok(ProviderEvent::Raw(b)) => raw.extend_from_slice(&b),
            other => rest.push(format!("{other:?}")),
        }
    }
    (raw, rest)
}

#[test]
fn a_same_family_client_gets_the_providers_bytes_whatever_the_split() {
    for case in CASES.iter().filter(|c| !c.file.ends_with(".chunks.txt")) {
        let body = sse_body(case.file, case.adapter);
        let plain: Vec<String> = events(case.adapter, vec![Bytes::copy_from_slice(&body)])
            .iter()
            .map(|e| format!("{e:?}"))
            .collect();
        let completes = plain.last().is_some_and(|l| l.starts_with("Ok(Finished"));
        for at in [0, 1, body.len() / 3, body.len() / 2, body.len()] {
            let (a, b) = body.split_at(at);
            let (raw, rest) = raw_concatenation(
                case.adapter,
                vec![Bytes::copy_from_slice(a), Bytes::copy_from_slice(b)],
            );
            assert_eq!(rest, plain, "{}: the events changed", case.file);
            if completes {
                // A driver stops reading at the provider's end mark; what it read is the body
                // up to there, byte for byte.
                assert!(!raw.is_empty(), "{}", case.file);
                assert_eq!(raw[..], body[..raw.len()], "{} split at {at}", case.file);
            }
        }
        let bytewise = body.iter().map(|b| Bytes::copy_from_slice(&[*b])).collect();
        let (raw, _) = raw_concatenation(case.adapter, bytewise);
        assert_eq!(
            raw[..],
            body[..raw.len()],
            "{} one byte per chunk",
            case.file
        );
    }
}
