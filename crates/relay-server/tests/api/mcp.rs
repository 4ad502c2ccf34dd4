//! `/mcp` (issue 41): the notes as MCP tools, spoken raw (JSON-RPC over Streamable HTTP, each
//! protocol version Claude Code and Codex send) on a real socket: initialise or discover, list,
//! each tool, the errors, the `Mcp-Method`/`Mcp-Name` checks, isolation between users and
//! projects, `Origin`/`Host` refusals, open mode on loopback only. `mcp_sdk.rs` drives the same
//! through the official Python SDK.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TestApp, body};

pub const ACCEPT: &str = "application/json, text/event-stream";

/// One MCP exchange: the HTTP status, the session id if one was given, and the JSON-RPC message
/// answered (from a JSON body or the SSE stream), `Null` when there is none.
pub struct Exchange {
    pub status: StatusCode,
    pub session: Option<String>,
    pub message: Value,
}

#[derive(Default, Clone)]
pub struct Conn<'a> {
    pub token: Option<&'a str>,
    pub project: Option<&'a str>,
    pub session: Option<String>,
    pub version: Option<&'a str>,
    pub headers: Vec<(&'a str, &'a str)>,
    pub query: &'a str,
}

pub async fn rpc(app: &TestApp, conn: &Conn<'_>, message: Value) -> Exchange {
    let mut request = app
        .client
        .post(app.url(&format!("/mcp{}", conn.query)))
        .header("accept", ACCEPT)
        .json(&message);
    if let Some(t) = conn.token {
        request = request.bearer_auth(t);
    }
    if let Some(p) = conn.project {
        request = request.header("x-relay-project", p);
    }
    if let Some(s) = &conn.session {
        request = request.header("mcp-session-id", s);
    }
    if let Some(v) = conn.version {
        request = request.header("mcp-protocol-version", v);
    }
    for (k, v) in &conn.headers {
        request = request.header(*k, *v);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let session = response
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap().starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    let message = if sse {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|m| m.get("id").is_some())
            .unwrap_or(Value::Null)
    } else {
        serde_json::from_str(&text).unwrap_or(Value::Null)
    };
    Exchange {
        status,
        session,
        message,
    }
}

fn initialize(version: &str, client: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": client, "version": "1.0"}
    }})
}

fn call(id: u64, name: &str, arguments: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
}

/// Initialises a session at `version` and sends `notifications/initialized`.
pub async fn open_session<'a>(
    app: &TestApp,
    mut conn: Conn<'a>,
    version: &'a str,
    client: &str,
) -> Conn<'a> {
    let init = rpc(app, &conn, initialize(version, client)).await;
    assert_eq!(init.status, StatusCode::OK, "{:?}", init.message);
    assert_eq!(init.message["result"]["protocolVersion"], version);
    assert_eq!(init.message["result"]["serverInfo"]["name"], "relay");
    assert!(init.message["result"]["capabilities"]["tools"].is_object());
    assert!(
        init.message["result"]["instructions"]
            .as_str()
            .unwrap()
            .contains("remember")
    );
    conn.session = Some(init.session.expect("a session id"));
    conn.version = Some(version);
    let done = rpc(
        app,
        &conn,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(done.status, StatusCode::ACCEPTED);
    conn
}

async fn notes(app: &TestApp, token: Option<&str>, project: &str) -> Vec<Value> {
    let r = app
        .get(&format!("/v1/memory/list?project_id={project}"), token)
        .await;
    assert_eq!(r.status(), StatusCode::OK);
    body(r).await["items"].as_array().unwrap().clone()
}

/// The 2026-07-28 `_meta` every stateless request carries.
fn modern_meta(client: &str) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": client, "version": "2.1.332"},
        "io.modelcontextprotocol/clientCapabilities": {}
    })
}

#[tokio::test]
async fn each_handshake_version_lists_and_calls_every_tool() {
    let app = TestApp::open().await;
    for (version, client, author) in [
        ("2025-06-18", "codex-mcp-client", "codex"),
        ("2025-11-25", "claude-code", "claude-code"),
        ("2025-11-25", "my-editor", "my-editor"),
    ] {
        let project = format!("p-{}", author);
        let conn = Conn {
            project: Some(&project),
            ..Conn::default()
        };
        let conn = open_session(&app, conn, version, client).await;
        let list = rpc(
            &app,
            &conn,
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        )
        .await;
        let tools = list.message["result"]["tools"].as_array().unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["remember", "recall", "search_notes", "forget"]);
        let remember = &tools[0];
        assert!(
            remember["description"]
                .as_str()
                .unwrap()
                .contains("how to build, test")
        );
        assert_eq!(remember["inputSchema"]["required"], json!(["note"]));

        let saved = rpc(
            &app,
            &conn,
            call(3, "remember", json!({"note": "run tests with make check"})),
        )
        .await;
        let result = &saved.message["result"];
        assert_eq!(result["isError"], false, "{result}");
        let id = result["structuredContent"]["id"]
            .as_str()
            .unwrap()
            .to_owned();
        let stored = notes(&app, None, &project).await;
        assert_eq!(stored.len(), 1);
        assert_eq!(stored[0]["id"], id.as_str());
        assert_eq!(stored[0]["author"], author, "{version} {client}");
        assert_eq!(stored[0]["note"], "run tests with make check");

        rpc(
            &app,
            &conn,
            call(
                4,
                "remember",
                json!({"note": "the database is PostgreSQL 15"}),
            ),
        )
        .await;
        let recall = rpc(&app, &conn, call(5, "recall", json!({}))).await;
        assert_eq!(
            recall.message["result"]["structuredContent"]["notes"],
            json!(["run tests with make check", "the database is PostgreSQL 15"])
        );
        let found = rpc(
            &app,
            &conn,
            call(
                6,
                "search_notes",
                json!({"query": "PostgreSQL", "limit": 1}),
            ),
        )
        .await;
        let found = &found.message["result"]["structuredContent"]["notes"];
        assert_eq!(found.as_array().unwrap().len(), 1, "{found}");
        assert!(found[0]["id"].as_str().unwrap().starts_with("mem#"));

        let gone = rpc(&app, &conn, call(7, "forget", json!({"id": id}))).await;
        assert_eq!(gone.message["result"]["isError"], false);
        assert_eq!(notes(&app, None, &project).await.len(), 1);
        let again = rpc(&app, &conn, call(8, "forget", json!({"id": id}))).await;
        assert_eq!(again.message["result"]["isError"], true);

        let ping = rpc(
            &app,
            &conn,
            json!({"jsonrpc": "2.0", "id": 9, "method": "ping"}),
        )
        .await;
        assert_eq!(ping.message["result"], json!({}));
    }
}

#[tokio::test]
async fn the_stateless_revision_discovers_and_checks_its_headers() {
    let app = TestApp::open().await;
    let conn = Conn {
        project: Some("modern"),
        version: Some("2026-07-28"),
        headers: vec![("mcp-method", "server/discover")],
        ..Conn::default()
    };
    let discover = rpc(
        &app,
        &conn,
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": modern_meta("claude-code")}}),
    )
    .await;
    assert_eq!(discover.status, StatusCode::OK, "{:?}", discover.message);
    let result = &discover.message["result"];
    let versions = result["supportedVersions"].as_array().unwrap();
    for v in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        assert!(versions.contains(&json!(v)), "{result}");
    }
    assert!(result["capabilities"]["tools"].is_object(), "{result}");
    assert!(discover.session.is_none(), "2026-07-28 has no sessions");

    let remember = |name: &'static str, tool: &'static str| {
        let mut c = conn.clone();
        c.headers = vec![("mcp-method", "tools/call"), ("mcp-name", name)];
        let body = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": tool, "arguments": {"note": "ship on Fridays never"}, "_meta": modern_meta("claude-code")}});
        (c, body)
    };
    let (c, b) = remember("remember", "remember");
    let ok = rpc(&app, &c, b).await;
    assert_eq!(ok.status, StatusCode::OK, "{:?}", ok.message);
    assert_eq!(ok.message["result"]["isError"], false, "{:?}", ok.message);
    let stored = notes(&app, None, "modern").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["author"], "claude-code");

    // A header that says something else than the body is refused before anything runs.
    let (c, b) = remember("forget", "remember");
    assert_eq!(rpc(&app, &c, b).await.status, StatusCode::BAD_REQUEST);
    let mut c = conn.clone();
    c.headers = vec![("mcp-method", "tools/list")];
    let (_, b) = remember("remember", "remember");
    assert_eq!(rpc(&app, &c, b).await.status, StatusCode::BAD_REQUEST);
    assert_eq!(notes(&app, None, "modern").await.len(), 1);
}

#[tokio::test]
async fn without_a_project_a_call_is_an_error_that_says_how_to_set_one() {
    let app = TestApp::open().await;
    let conn = open_session(&app, Conn::default(), "2025-06-18", "codex-mcp-client").await;
    let listed = rpc(
        &app,
        &conn,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(
        listed.message["result"]["tools"].as_array().unwrap().len(),
        4
    );
    let refused = rpc(&app, &conn, call(3, "remember", json!({"note": "x"}))).await;
    let message = refused.message["error"]["message"].as_str().unwrap();
    assert!(message.contains("x-relay-project"), "{message}");
    assert!(message.contains("?project="), "{message}");

    // `?project=` on the URL names it; a model's argument never does.
    let by_query = Conn {
        query: "?project=from-url",
        ..Conn::default()
    };
    let by_query = open_session(&app, by_query, "2025-06-18", "codex-mcp-client").await;
    let saved = rpc(
        &app,
        &by_query,
        call(
            4,
            "remember",
            json!({"note": "kept", "project_id": "elsewhere"}),
        ),
    )
    .await;
    // The schema has no project argument: whether the call is refused for the extra argument or
    // runs, nothing lands in the project the model named.
    assert!(saved.message["result"].is_object() || saved.message["error"].is_object());
    assert!(notes(&app, None, "elsewhere").await.is_empty());
    let kept = rpc(
        &app,
        &by_query,
        call(6, "remember", json!({"note": "kept"})),
    )
    .await;
    assert_eq!(
        kept.message["result"]["isError"], false,
        "{:?}",
        kept.message
    );
    let stored = notes(&app, None, "from-url").await;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["note"], "kept");
    let bad = rpc(&app, &by_query, call(5, "nope", json!({}))).await;
    assert!(bad.message["error"].is_object(), "{:?}", bad.message);
}

#[tokio::test]
async fn users_and_projects_never_see_each_others_notes() {
    let app = TestApp::with_auth().await;
    let alice = app.user("alice@example.com").await;
    let bob = app.user("bob@example.com").await;
    let in_p1 = Conn {
        token: Some(&alice),
        project: Some("p1"),
        ..Conn::default()
    };
    let a1 = open_session(&app, in_p1, "2025-11-25", "claude-code").await;
    let saved = rpc(
        &app,
        &a1,
        call(2, "remember", json!({"note": "alice's secret"})),
    )
    .await;
    let id = saved.message["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    let b1 = Conn {
        token: Some(&bob),
        project: Some("p1"),
        ..Conn::default()
    };
    let b1 = open_session(&app, b1, "2025-11-25", "claude-code").await;
    let recall = rpc(&app, &b1, call(3, "recall", json!({}))).await;
    assert_eq!(
        recall.message["result"]["structuredContent"]["notes"],
        json!([])
    );
    let search = rpc(
        &app,
        &b1,
        call(4, "search_notes", json!({"query": "secret"})),
    )
    .await;
    assert_eq!(
        search.message["result"]["structuredContent"]["notes"],
        json!([])
    );
    let forget = rpc(&app, &b1, call(5, "forget", json!({"id": id}))).await;
    assert_eq!(forget.message["result"]["isError"], true);

    // Alice herself, connected for another project, cannot delete it either.
    let a2 = Conn {
        token: Some(&alice),
        project: Some("p2"),
        ..Conn::default()
    };
    let a2 = open_session(&app, a2, "2025-11-25", "claude-code").await;
    let recall = rpc(&app, &a2, call(6, "recall", json!({}))).await;
    assert_eq!(
        recall.message["result"]["structuredContent"]["notes"],
        json!([])
    );
    let forget = rpc(&app, &a2, call(7, "forget", json!({"id": id}))).await;
    assert_eq!(forget.message["result"]["isError"], true);
    assert_eq!(notes(&app, Some(&alice), "p1").await.len(), 1);

    // A session opened by Alice answers only to a request that carries a valid token, and the
    // token, not the session, decides whose notes a call reaches.
    let mut stolen = a1.clone();
    stolen.token = Some(&bob);
    let recall = rpc(&app, &stolen, call(8, "recall", json!({}))).await;
    assert_eq!(
        recall.message["result"]["structuredContent"]["notes"],
        json!([])
    );
    let mut anonymous = a1.clone();
    anonymous.token = None;
    let refused = rpc(&app, &anonymous, call(9, "recall", json!({}))).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
    let refused = rpc(&app, &Conn::default(), initialize("2025-11-25", "x")).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn web_origins_and_foreign_hosts_are_refused() {
    for app in [TestApp::open().await, TestApp::with_auth().await] {
        let token = if app.state.config().open_mode() {
            None
        } else {
            Some(app.user("carol@example.com").await)
        };
        let conn = Conn {
            token: token.as_deref(),
            project: Some("p"),
            headers: vec![("origin", "https://evil.example")],
            ..Conn::default()
        };
        let refused = rpc(&app, &conn, initialize("2025-11-25", "x")).await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN);
        let own = format!("http://{}", app.addr);
        let conn = Conn {
            headers: vec![("origin", own.as_str())],
            ..conn
        };
        let allowed = rpc(&app, &conn, initialize("2025-11-25", "x")).await;
        assert_eq!(allowed.status, StatusCode::OK);
    }
    // DNS rebinding: open mode answers loopback host names only.
    let app = TestApp::open().await;
    let conn = Conn {
        headers: vec![("host", "attacker.example")],
        ..Conn::default()
    };
    let refused = rpc(&app, &conn, initialize("2025-11-25", "x")).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
}

/// This machine's address on a non-loopback interface, if it has one (learnt from the route a UDP
/// socket would take; nothing is sent).
fn lan_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[tokio::test]
async fn open_mode_serves_mcp_on_loopback_only() {
    let Some(lan) = lan_address() else {
        eprintln!("skipped: no non-loopback address on this machine");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let mut config = crate::helpers::open_config(dir.path());
    config.allowed_hosts = vec![lan.to_string()];
    let relay = relay_server::Relay::with_stores(
        config.clone(),
        relay_server::store::Stores::open(&config).await.unwrap(),
        &crate::helpers::NoEnv,
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind((lan, 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let router = relay.router();
    tokio::spawn(async move {
        let _ = relay_server::serve(listener, router, std::future::pending()).await;
    });
    let client = reqwest::Client::new();
    let post = |path: &'static str| {
        client
            .post(format!("http://{addr}{path}"))
            .header("accept", ACCEPT)
            .json(&initialize("2025-11-25", "x"))
            .send()
    };
    let refused = post("/mcp").await.unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let text = refused.text().await.unwrap();
    assert!(text.contains("loopback"), "{text}");
    // The rest of the API still answers over this address (it was allowed to listen there).
    let health = client
        .get(format!("http://{addr}/healthz"))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}
