//! MCP's older HTTP+SSE transport against a real third-party server: an SSE-only server on the
//! official Python SDK (PyPI `mcp`, pinned by `.ci/run`; `tests/fixtures/mcp_sse/server.py`),
//! reached by `url` whether `transport:` says `sse` or leaves it to be found out, with the same
//! reconnect, timeout and error behaviour as the other transports.

use crate::support::mcp;

use cohort::mcp::McpTransport;
use cohort::mcp::{HttpFlavor, McpCall, McpClient, McpError, McpOptions, McpServerConfig};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The SSE-only server, running until dropped.
struct SseServer {
    child: tokio::process::Child,
    port: u16,
}

impl SseServer {
    /// Starts it on `port` (a free one when 0) and waits until it takes connections.
    async fn start(port: u16) -> SseServer {
        let port = match port {
            0 => free_port(),
            p => p,
        };
        let script =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mcp_sse/server.py");
        let child = tokio::process::Command::new(mcp::time_python())
            .arg(script)
            .arg(port.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let started = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err()
        {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the SSE server did not start (is PyPI's `mcp` installed? run .ci/run)"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        SseServer { child, port }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/sse", self.port)
    }

    async fn kill(mut self) -> u16 {
        self.child.kill().await.unwrap();
        self.port
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(url: &str, flavor: HttpFlavor, timeout: Duration) -> McpServerConfig {
    McpServerConfig {
        risk: Default::default(),
        cache: None,
        name: "old".into(),
        description: "an SSE-only server".into(),
        transport: McpTransport::Http {
            url: url.into(),
            flavor,
            oauth: None,
        },
        call_timeout: timeout,
        connect_timeout: Duration::from_secs(10),
        file: "old.yaml".into(),
    }
}

fn client(config: McpServerConfig) -> Arc<McpClient> {
    McpClient::new(
        vec![config],
        McpOptions::new(env!("CARGO_BIN_EXE_cohort"), &|_| None),
    )
}

fn tool(name: &str, arguments: Value) -> McpCall {
    McpCall::Tool {
        name: name.into(),
        arguments: arguments.as_object().unwrap().clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_only_server_is_described_and_called_whether_named_or_found_out() {
    let server = SseServer::start(0).await;
    for flavor in [HttpFlavor::Sse, HttpFlavor::Auto] {
        let c = client(config(&server.url(), flavor, Duration::from_secs(30)));
        let described = c.describe("old").await.unwrap();
        let tools: Vec<&str> = described.tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(tools, ["echo", "wait"], "{flavor:?}");
        // Calls at once share the one session; each gets its own answer.
        let calls: Vec<McpCall> = (0..5)
            .map(|i| tool("echo", json!({"text": format!("over sse {i}")})))
            .collect();
        let answers = futures::future::join_all(calls.iter().map(|call| c.call("old", call))).await;
        for (i, a) in answers.into_iter().enumerate() {
            assert_eq!(mcp::first_text(&a.unwrap()), format!("echo: over sse {i}"));
        }
        c.shutdown().await;
    }
    // Told to speak streamable HTTP only, it is refused, and the error says how.
    let c = client(config(
        &server.url(),
        HttpFlavor::StreamableHttp,
        Duration::from_secs(30),
    ));
    let refused = c.describe("old").await.unwrap_err();
    assert!(matches!(refused, McpError::Connect { .. }), "{refused}");
    assert!(refused.to_string().contains("405"), "{refused}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_sse_server_fails_the_call_in_flight_and_the_next_call_connects_again() {
    let server = SseServer::start(0).await;
    let c = client(config(
        &server.url(),
        HttpFlavor::Auto,
        Duration::from_secs(30),
    ));
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move { c.call("old", &tool("wait", json!({"seconds": 20}))).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let port = server.kill().await;
    let failed = tokio::time::timeout(Duration::from_secs(10), waiting)
        .await
        .expect("the call in flight ends with its server")
        .unwrap()
        .unwrap_err();
    assert!(matches!(failed, McpError::ServerGone { .. }), "{failed}");
    // While the server is down a call fails at once, saying why; once it is back, the next
    // call connects again.
    let down = c
        .call("old", &tool("echo", json!({"text": "x"})))
        .await
        .unwrap_err();
    assert!(matches!(down, McpError::Connect { .. }), "{down}");
    let _back = SseServer::start(port).await;
    let again = c
        .call("old", &tool("echo", json!({"text": "again"})))
        .await
        .unwrap();
    assert_eq!(mcp::first_text(&again), "echo: again");
    c.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_sse_call_outlasting_its_timeout_times_out_and_the_session_stays() {
    let server = SseServer::start(0).await;
    let c = client(config(
        &server.url(),
        HttpFlavor::Sse,
        Duration::from_secs(1),
    ));
    let slow = c
        .call("old", &tool("wait", json!({"seconds": 5})))
        .await
        .unwrap_err();
    assert!(matches!(slow, McpError::Timeout { .. }), "{slow}");
    let quick = c
        .call("old", &tool("echo", json!({"text": "still here"})))
        .await
        .unwrap();
    assert_eq!(mcp::first_text(&quick), "echo: still here");
    c.shutdown().await;
}
