//! Conversion: an Anthropic Messages client answered by an OpenAI Chat Completions provider.

use super::{Provider, convert, messages_request};

#[tokio::test]
async fn request_and_answer() {
    let c = convert("/v1/messages", Provider::Chat, messages_request()).await;
    insta::assert_json_snapshot!("request", c.upstream);
    insta::assert_json_snapshot!("answer", c.answer);
}
