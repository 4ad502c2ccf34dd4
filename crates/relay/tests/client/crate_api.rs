//! The `relay-client` crate against a real relay: legs as a stream, cancellation by drop, typed
//! errors, and the other endpoints.

use futures::StreamExt;
use relay_client::wire::ErrorCode;
use relay_client::wire::agent::{AgentRequest, Content, FinishReason, Message, MessageRole};
use relay_client::wire::memory::{DeleteRequest, ListQuery, PatchRequest, RememberRequest};
use relay_client::wire::suggest::SuggestRequest;
use relay_client::wire::tools::{ToolRole, allowed_names};
use relay_client::{AgentEvent, Client, Error};

use crate::support::*;

fn ask(text: &str) -> AgentRequest {
    AgentRequest {
        messages: vec![Message {
            role: MessageRole::User,
            content: Some(Content::Text(text.into())),
            tool_calls: None,
            tool_call_id: None,
        }],
        project_id: Some("proj-1".into()),
        ..AgentRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_leg_streams_typed_events_and_ends_with_one_terminal_event() {
    let relay = Relay::open(vec![text("hello there")]).await;
    let client = Client::new(relay.url.as_str()).unwrap();
    let events: Vec<AgentEvent> = client
        .leg(&ask("hi"))
        .await
        .unwrap()
        .map(Result::unwrap)
        .collect()
        .await;
    assert!(
        matches!(&events[0], AgentEvent::Start { model, project_id, .. }
        if model == "scripted" && project_id.as_deref() == Some("proj-1"))
    );
    assert_eq!(
        events[1],
        AgentEvent::Text {
            text: "hello there".into()
        }
    );
    assert!(matches!(
        events.last(),
        Some(AgentEvent::Done {
            finish_reason: FinishReason::Stop,
            ..
        })
    ));
    assert_eq!(events.iter().filter(|e| e.is_terminal()).count(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn dropping_the_stream_cancels_the_upstream_call() {
    let relay = Relay::open(vec![Reply::Stall]).await;
    let client = Client::new(relay.url.as_str()).unwrap();
    let mut leg = client.leg(&ask("think")).await.unwrap();
    assert!(matches!(
        leg.next().await,
        Some(Ok(AgentEvent::Start { .. }))
    ));
    assert!(matches!(
        leg.next().await,
        Some(Ok(AgentEvent::Text { .. }))
    ));
    drop(leg);
    relay.upstream.wait_dropped().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn errors_carry_the_machine_code() {
    let relay = Relay::with_auth(vec![], "").await;
    let client = Client::new(relay.url.as_str()).unwrap();
    client
        .signup("dup@example.com", "correct-horse-battery")
        .await
        .unwrap();
    let e = client
        .signup("dup@example.com", "correct-horse-battery")
        .await
        .unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(409), Some(ErrorCode::EmailTaken))
    );
    let e = client
        .signin("dup@example.com", "wrong-password")
        .await
        .unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::InvalidCredentials));
    let e = client.me().await.unwrap_err();
    assert!(
        matches!(&e, Error::Api { status: 401, code, .. } if code == "unauthorized"),
        "{e:?}"
    );
    let e = client.leg(&ask("hi")).await.err().unwrap();
    assert_eq!(e.status(), Some(401));
}

#[tokio::test(flavor = "multi_thread")]
async fn accounts_memory_tools_search_and_suggest() {
    let relay = Relay::with_auth(vec![], "").await;
    let anon = Client::new(relay.url.as_str()).unwrap();
    let session = anon
        .signup("mem@example.com", "correct-horse-battery")
        .await
        .unwrap();
    let client = anon.clone().with_token(Some(session.token));
    let me = client.me().await.unwrap();
    assert_eq!((me.auth, me.email.as_str()), (true, "mem@example.com"));

    for note in ["first", "second"] {
        client
            .remember(&RememberRequest {
                note: note.into(),
                project_id: Some("p1".into()),
                project: None,
                author: None,
                mem_type: None,
            })
            .await
            .unwrap();
    }
    assert_eq!(client.recall("p1").await.unwrap(), ["first", "second"]);
    let list = client
        .list_notes(&ListQuery {
            project_id: Some("p1".into()),
            ..ListQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(list.total, 2);
    let id = list.items[0].id.clone();
    let patched = client
        .patch_note(
            &id,
            &PatchRequest {
                content: Some("edited".into()),
                note: None,
                pinned: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(patched.item.note, "edited");
    assert_eq!(client.delete_note(&id).await.unwrap().deleted, 1);
    let d = client
        .delete_notes(&DeleteRequest {
            project_id: Some("p1".into()),
            ..DeleteRequest::default()
        })
        .await
        .unwrap();
    assert_eq!(d.deleted, 1);
    assert_eq!(client.delete_all(None).await.unwrap().deleted, 0);

    let tools = client.tools(Some(ToolRole::Orchestrator)).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, allowed_names(Some(ToolRole::Orchestrator)));

    let found = client.search("rust", Some(3)).await.unwrap();
    assert_eq!(found.results[0].title, "About rust");

    let s = client
        .suggest(&SuggestRequest {
            partial: "g".into(),
            cwd: "/".into(),
            recent: vec![],
        })
        .await
        .unwrap();
    assert_eq!(s.suggestion, None, "under 2 characters");

    client.signout().await.unwrap();
    assert_eq!(client.me().await.unwrap_err().status(), Some(401));
}
