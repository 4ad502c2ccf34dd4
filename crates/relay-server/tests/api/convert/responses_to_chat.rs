//! Conversion: an OpenAI Responses client answered by an OpenAI Chat Completions provider.

use super::{Provider, convert, responses_request};

#[tokio::test]
async fn request_and_answer() {
    let c = convert("/v1/responses", Provider::Chat, responses_request()).await;
    insta::assert_json_snapshot!("request", c.upstream);
    insta::assert_json_snapshot!("answer", c.answer);
}
