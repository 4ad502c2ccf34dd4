//! The tools that go through the relay: web_search (`POST /v1/search`), and remember/recall (rule
//! 6) on the memory endpoints for this project's id, the id the relay derives from every leg.

use relay_wire::memory::RememberRequest;
use serde_json::Value;

use super::{Ctx, str_arg};

pub async fn web_search(ctx: &Ctx, args: &Value) -> anyhow::Result<String> {
    let query = str_arg(args, "query")?;
    let found = ctx
        .client
        .search(query, Some(5))
        .await
        .map_err(|e| anyhow::anyhow!("web search failed: {e}"))?;
    if found.results.is_empty() {
        return Ok(format!("no results for {query}"));
    }
    Ok(found
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{}. {}\n   {}\n   {}", i + 1, r.title, r.url, r.snippet))
        .collect::<Vec<_>>()
        .join("\n"))
}

pub async fn remember(ctx: &Ctx, args: &Value) -> anyhow::Result<String> {
    let note = str_arg(args, "note")?;
    let request = RememberRequest {
        note: note.to_owned(),
        project_id: Some(ctx.project.id()),
        project: None,
        author: Some("agent".to_owned()),
        mem_type: None,
    };
    ctx.client
        .remember(&request)
        .await
        .map_err(|e| anyhow::anyhow!("could not remember the note: {e}"))?;
    Ok("remembered".to_owned())
}

pub async fn recall(ctx: &Ctx) -> anyhow::Result<String> {
    let notes = ctx
        .client
        .recall(&ctx.project.id())
        .await
        .map_err(|e| anyhow::anyhow!("could not recall notes: {e}"))?;
    if notes.is_empty() {
        return Ok("no notes saved for this project yet".to_owned());
    }
    Ok(notes
        .iter()
        .map(|n| format!("- {n}"))
        .collect::<Vec<_>>()
        .join("\n"))
}
