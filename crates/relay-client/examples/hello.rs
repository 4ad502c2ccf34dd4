//! Sends one prompt to a relay and prints the streamed answer.
//!
//! `RELAY_URL` (default `http://127.0.0.1:7711`) and `RELAY_TOKEN` (none in open mode) say where and
//! who; the prompt is the first argument.

use futures::StreamExt;
use relay_client::wire::agent::{AgentRequest, Content, Message, MessageRole};
use relay_client::{AgentEvent, Client};

#[tokio::main]
async fn main() -> Result<(), relay_client::Error> {
    let base = std::env::var("RELAY_URL").unwrap_or_else(|_| "http://127.0.0.1:7711".into());
    let prompt = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "Say hello".into());
    let client = Client::new(base)?.with_token(std::env::var("RELAY_TOKEN").ok());
    let request = AgentRequest {
        messages: vec![Message {
            role: MessageRole::User,
            content: Some(Content::Text(prompt)),
            tool_calls: None,
            tool_call_id: None,
        }],
        ..AgentRequest::default()
    };
    let mut leg = client.leg(&request).await?;
    while let Some(event) = leg.next().await {
        match event? {
            AgentEvent::Text { text } => print!("{text}"),
            AgentEvent::Done { .. } => println!(),
            AgentEvent::Error { message, .. } => eprintln!("error: {message}"),
            _ => {}
        }
    }
    Ok(())
}
