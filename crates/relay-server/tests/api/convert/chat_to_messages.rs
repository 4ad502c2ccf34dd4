//! Conversion: an OpenAI Chat Completions client answered by an Anthropic Messages provider.

use super::{Provider, chat_request, convert};

#[tokio::test]
async fn request_and_answer() {
    let c = convert("/v1/chat/completions", Provider::Anthropic, chat_request()).await;
    insta::assert_json_snapshot!("request", c.upstream);
    insta::assert_json_snapshot!("answer", c.answer);
}
