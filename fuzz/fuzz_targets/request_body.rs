//! Arbitrary request bodies through the same parsing and validation the handlers use: every input
//! is either accepted or refused with an `invalid_request`, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use relay_server::domain::{Email, NoteText, Password, ProjectId, parse_author, parse_mem_type};
use relay_server::http::extract::parse_json;
use relay_wire::account::Credentials;
use relay_wire::agent::AgentRequest;
use relay_wire::memory::{DeleteRequest, PatchRequest, RememberRequest};

fuzz_target!(|data: &[u8]| {
    if let Ok(req) = parse_json::<AgentRequest>(data) {
        let _ = relay_server::http::agent::validate(&req);
        let _ = relay_server::http::agent::project_of(&req);
    }
    if let Ok(r) = parse_json::<RememberRequest>(data) {
        let _ = NoteText::parse(&r.note, "note");
        let _ = ProjectId::from_pair(r.project_id.as_deref(), r.project.as_deref());
        let _ = parse_author(r.author.as_deref());
        let _ = parse_mem_type(r.mem_type.as_deref());
    }
    if let Ok(c) = parse_json::<Credentials>(data) {
        let _ = Email::parse(&c.email);
        let _ = Password::parse(&c.password);
    }
    let _ = parse_json::<DeleteRequest>(data);
    if let Ok(p) = parse_json::<PatchRequest>(data)
        && let Some(c) = p.content
    {
        let _ = NoteText::parse(&c, "content");
    }
});
