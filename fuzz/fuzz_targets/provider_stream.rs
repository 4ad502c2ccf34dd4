//! Arbitrary bytes, cut into arbitrary reads, through the SSE driver and each provider normaliser:
//! no panic, no hang, and the stream always ends.
#![no_main]

use bytes::Bytes;
use futures::StreamExt;
use libfuzzer_sys::fuzz_target;
use relay_server::providers::{anthropic, gemini, openai, sse};

/// The first byte picks the read size pattern; the rest is the body.
fn chunks(data: &[u8]) -> Vec<Result<Bytes, std::io::Error>> {
    let Some((&seed, body)) = data.split_first() else {
        return Vec::new();
    };
    let step = usize::from(seed % 17) + 1;
    body.chunks(step).map(|c| Ok(Bytes::copy_from_slice(c))).collect()
}

fn drain(stream: relay_server::providers::EventStream) {
    futures::executor::block_on(async move {
        let mut stream = stream;
        let mut n = 0usize;
        while let Some(item) = stream.next().await {
            n += 1;
            if item.is_err() || n > 1_000_000 {
                break;
            }
        }
    });
}

fuzz_target!(|data: &[u8]| {
    drain(sse::drive(futures::stream::iter(chunks(data)), openai::Normaliser::new()));
    drain(sse::drive(futures::stream::iter(chunks(data)), anthropic::Normaliser::new()));
    drain(sse::drive(futures::stream::iter(chunks(data)), gemini::Normaliser::new()));
});
