//! Conversion: an OpenAI Responses client answered by an Anthropic Messages provider.

use super::{Provider, convert, responses_request};

#[tokio::test]
async fn request_and_answer() {
    let c = convert("/v1/responses", Provider::Anthropic, responses_request()).await;
    insta::assert_json_snapshot!("request", c.upstream);
    insta::assert_json_snapshot!("answer", c.answer);
}
