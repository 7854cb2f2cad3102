//! An MCP server behind OAuth, as a team meets one: a protected resource (the bundled workspace
//! server behind a gate that wants a bearer token) with its own authorization server, on
//! loopback. A person logs in once with `cohort mcp login` (the real binary: it prints where to
//! consent, and the "browser" here follows that address back to the binary's loopback
//! listener); the tokens land in a file only its user reads; the team's client, which has
//! nobody to consent, uses them and refreshes them when they run out; a client with no tokens
//! fails the call saying how to log in; a token is never in an error or the server file.

use crate::support::scratch;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get, post};
use axum::{Form, Json, Router};
use cohort::mcp::oauth::TokenPlace;
use cohort::mcp::{McpCall, McpClient, McpOptions, load_server};
use scratch::Scratch;
use serde_json::json;
use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long an access token the test's authorization server hands out lasts.
const LIFETIME: Duration = Duration::from_secs(4);

/// What the authorization server has handed out.
#[derive(Default)]
struct Grants {
    /// The access tokens it takes, newest last: a refresh does not end the ones before it (as
    /// most servers do not). A client refreshes a token 30 s before it runs out (rmcp), so
    /// with these short lifetimes every request refreshes: a refresh that ended the tokens
    /// before it would refuse the request sent beside it (a stream's, a call's) for a token
    /// just replaced, and the test fail on a loaded machine.
    live: Vec<String>,
    /// How many were issued.
    issued: usize,
    /// How many refresh grants it answered.
    refreshed: usize,
    /// Each authorization request's code challenge, by the code it issued.
    challenges: HashMap<String, String>,
}

#[derive(Clone)]
struct Gate {
    base: String,
    inner: SocketAddr,
    grants: Arc<Mutex<Grants>>,
    http: reqwest::Client,
}

/// The protected resource and its authorization server, on one loopback address; the MCP
/// server itself (the bundled workspace) behind it on `inner`.
async fn start(root: &std::path::Path) -> (Gate, SocketAddr) {
    let inner_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let inner = inner_listener.local_addr().unwrap();
    let args = vec!["--root".to_owned(), root.display().to_string()];
    tokio::spawn(async move {
        cohort::bundled::serve_http(
            "workspace",
            &args,
            inner_listener,
            std::future::pending(),
            None,
        )
        .await
        .unwrap();
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let gate = Gate {
        base: format!("http://{addr}"),
        inner,
        grants: Arc::default(),
        http: reqwest::Client::new(),
    };
    let app = Router::new()
        .route(
            "/.well-known/oauth-protected-resource/mcp",
            get(resource_metadata),
        )
        .route(
            "/.well-known/oauth-authorization-server",
            get(server_metadata),
        )
        .route("/register", post(register))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/mcp", any(mcp))
        .with_state(gate.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (gate, addr)
}

async fn resource_metadata(State(g): State<Gate>) -> Json<serde_json::Value> {
    Json(
        json!({"resource": format!("{}/mcp", g.base), "authorization_servers": [g.base],
        "scopes_supported": ["files"]}),
    )
}

async fn server_metadata(State(g): State<Gate>) -> Json<serde_json::Value> {
    let b = &g.base;
    Json(
        json!({"issuer": b, "authorization_endpoint": format!("{b}/authorize"),
        "token_endpoint": format!("{b}/token"), "registration_endpoint": format!("{b}/register"),
        "response_types_supported": ["code"], "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"]}),
    )
}

async fn register(Json(body): Json<serde_json::Value>) -> impl IntoResponse {
    (
        StatusCode::CREATED,
        Json(json!({"client_id": "cohort-client", "redirect_uris": body["redirect_uris"]})),
    )
}

/// The person consents at once: back to the client's address with a code.
async fn authorize(State(g): State<Gate>, Query(q): Query<HashMap<String, String>>) -> Response {
    assert_eq!(q["code_challenge_method"], "S256");
    assert_eq!(q["scope"], "files", "the scope the resource names");
    let code = format!("code-{}", g.grants.lock().unwrap().challenges.len());
    g.grants
        .lock()
        .unwrap()
        .challenges
        .insert(code.clone(), q["code_challenge"].clone());
    let back = format!("{}?code={code}&state={}", q["redirect_uri"], q["state"]);
    Redirect::to(&back).into_response()
}

async fn token(State(g): State<Gate>, Form(f): Form<HashMap<String, String>>) -> Response {
    let mut grants = g.grants.lock().unwrap();
    match f["grant_type"].as_str() {
        "authorization_code" => {
            use base64::Engine;
            use sha2::Digest;
            let challenge = &grants.challenges[&f["code"]];
            let verifier = sha2::Sha256::digest(f["code_verifier"].as_bytes());
            let computed = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(verifier);
            assert_eq!(&computed, challenge, "PKCE");
        }
        "refresh_token" => {
            assert_eq!(f["refresh_token"], "refresh-secret");
            grants.refreshed += 1;
        }
        other => panic!("grant {other}"),
    }
    grants.issued += 1;
    let access = format!("access-secret-{}", grants.issued);
    grants.live.push(access.clone());
    // Runs out soon: the next request after `LIFETIME` refreshes it. Not at once: the login's
    // own first call comes right after its consent, which a loaded machine may take a second
    // or more to finish, and a token run out by then would ask for a second consent.
    Json(
        json!({"access_token": access, "token_type": "Bearer", "expires_in": LIFETIME.as_secs(),
        "refresh_token": "refresh-secret", "scope": "files"}),
    )
    .into_response()
}

/// The protected resource: a request with the live token goes through to the MCP server.
async fn mcp(State(g): State<Gate>, req: axum::extract::Request) -> Response {
    let bearer = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    let taken = g
        .grants
        .lock()
        .unwrap()
        .live
        .iter()
        .any(|t| Some(t.as_str()) == bearer);
    if !taken {
        let challenge = format!(
            "Bearer error=\"invalid_token\", resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            g.base
        );
        return (
            StatusCode::UNAUTHORIZED,
            [("www-authenticate", challenge)],
            "no",
        )
            .into_response();
    }
    let (parts, body) = req.into_parts();
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut headers = HeaderMap::new();
    for (k, v) in &parts.headers {
        if k != "host" && k != "authorization" && k != "content-length" {
            headers.insert(k.clone(), v.clone());
        }
    }
    let url = format!("http://{}/mcp", g.inner);
    let sent = g
        .http
        .request(parts.method, url)
        .headers(headers)
        .body(body)
        .send()
        .await
        .unwrap();
    let mut out = Response::builder().status(sent.status());
    for (k, v) in sent.headers() {
        out = out.header(k, v);
    }
    out.body(Body::from_stream(sent.bytes_stream())).unwrap()
}

fn server_file(dir: &std::path::Path, addr: SocketAddr) -> std::path::PathBuf {
    let file = dir.join("files.yaml");
    std::fs::write(
        &file,
        format!("name: files\ndescription: The team's files, behind OAuth.\nurl: http://{addr}/mcp\noauth: {{}}\n"),
    )
    .unwrap();
    file
}

/// `cohort mcp login FILE`, with the "browser" following the address it prints.
async fn log_in(file: &std::path::Path, tokens: &std::path::Path) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["mcp", "login"])
        .arg(file)
        .env("COHORT_OAUTH_DIR", tokens)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = Vec::new();
    let address = loop {
        let line = match lines.next() {
            Some(line) => line.unwrap(),
            None => panic!("login printed no address: {said:?}"),
        };
        said.push(line.clone());
        if let Some(a) = line.trim().strip_prefix("http://") {
            break format!("http://{a}");
        }
    };
    // The browser: to the authorization server, which sends it back to the login's listener.
    let page = reqwest::get(&address).await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(
        page.text()
            .await
            .unwrap()
            .contains("Cohort has the authorization")
    );
    let rest: Vec<String> = lines.map(Result::unwrap).collect();
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "the login failed: {rest:?}");
    assert!(rest.join("\n").contains("Authorized"), "{rest:?}");
}

fn client(file: &std::path::Path, tokens: TokenPlace) -> Arc<McpClient> {
    let server = load_server(file).unwrap();
    let opts = McpOptions {
        oauth_tokens: tokens,
        ..McpOptions::new(env!("CARGO_BIN_EXE_cohort"), &|_| None)
    };
    McpClient::new(vec![server], opts)
}

fn write(path: &str) -> McpCall {
    McpCall::Tool {
        name: "write_file".into(),
        arguments: json!({"path": path, "content": "hello"})
            .as_object()
            .unwrap()
            .clone(),
    }
}

// Several threads: the login's output is read blocking while the servers answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_logs_in_once_and_the_team_uses_and_refreshes_the_tokens() {
    let root = Scratch::new("mcp-oauth-files");
    let dir = Scratch::new("mcp-oauth");
    let (gate, addr) = start(&root).await;
    let file = server_file(&dir, addr);

    // Without a login, the team's client (nobody to consent) fails, saying what to do.
    let nobody = client(&file, TokenPlace::Dir(dir.join("none")));
    let err = nobody
        .call("files", &write("a.txt"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cohort mcp login"), "{err}");
    assert!(err.contains("files.yaml"), "{err}");
    nobody.shutdown().await;

    let tokens = dir.join("tokens");
    log_in(&file, &tokens).await;
    let kept: Vec<_> = std::fs::read_dir(&tokens)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&kept[0]).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "only its user reads the tokens");
    assert!(!std::fs::read_to_string(&file).unwrap().contains("secret"));

    // The team: its client finds the tokens, refreshes the one that ran out, and calls.
    let team = client(&file, TokenPlace::Dir(tokens.clone()));
    let at_login = gate.grants.lock().unwrap().refreshed;
    tokio::time::sleep(LIFETIME + Duration::from_millis(100)).await;
    team.call("files", &write("a.txt")).await.unwrap();
    tokio::time::sleep(LIFETIME + Duration::from_millis(100)).await;
    team.call("files", &write("b.txt")).await.unwrap();
    assert!(root.join("a.txt").is_file() && root.join("b.txt").is_file());
    assert!(
        gate.grants.lock().unwrap().refreshed >= at_login + 2,
        "each token that ran out was refreshed"
    );
    // The team's client goes first: a stream of its own reconnecting now would refresh too,
    // and the counts below are of the refreshes this part makes.
    team.shutdown().await;
    // The server no longer takes the kept token (a refresh another request or process made
    // replaced it): refused with `invalid_token`, the team refreshes the kept tokens rather
    // than ask for a login nobody here could give; only a refusal after that asks for one.
    gate.grants.lock().unwrap().live = vec!["replaced-elsewhere".into()];
    let oauth = cohort::mcp::oauth::OAuth::new(TokenPlace::Dir(tokens.clone()), None);
    let challenge = "Bearer error=\"invalid_token\"";
    let url = format!("{}/mcp", gate.base);
    let place = ("files", file.to_str().unwrap());
    let settings = cohort::config::mcp_servers::OAuthSettings::default();
    let before = gate.grants.lock().unwrap().refreshed;
    oauth
        .authorize(place, &url, (&settings, None), challenge, true)
        .await
        .unwrap();
    assert_eq!(gate.grants.lock().unwrap().refreshed, before + 1);
    assert!(
        oauth
            .authorize(place, &url, (&settings, None), challenge, false)
            .await
            .is_err(),
        "refused again: a login is needed"
    );
    let refreshed = gate.grants.lock().unwrap().refreshed;
    assert!(
        refreshed >= 1,
        "the tokens were refreshed ({refreshed} times)"
    );
    let on_disk = std::fs::read_to_string(&kept[0]).unwrap();
    let live = gate.grants.lock().unwrap().live.last().unwrap().clone();
    assert!(
        on_disk.contains(&live),
        "the refreshed token is kept for the next start"
    );
}
