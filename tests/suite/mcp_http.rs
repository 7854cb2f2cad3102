//! The shared client against the bundled workspace server over streamable HTTP: calls work,
//! a server that went away fails calls promptly (not after the whole timeout), and the client
//! reconnects once the server is back.

use crate::support::scratch;

use cohort::mcp::{McpCall, McpClient, McpOptions, McpServerConfig, McpTransport};
use scratch::Scratch;
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

async fn serve(root: PathBuf, addr: std::net::SocketAddr) -> oneshot::Sender<()> {
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let args = vec!["--root".to_owned(), root.display().to_string()];
    tokio::spawn(async move {
        cohort::bundled::serve_http(
            "workspace",
            &args,
            listener,
            async {
                let _ = stopped.await;
            },
            None,
        )
        .await
        .unwrap();
    });
    stop
}

fn tool(name: &str, args: serde_json::Value) -> McpCall {
    McpCall::Tool {
        name: name.into(),
        arguments: args.as_object().unwrap().clone(),
    }
}

#[tokio::test]
async fn the_client_uses_the_bundled_workspace_over_http_and_survives_its_restart() {
    let root = Scratch::new("mcp-http");
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let stop = serve(root.to_path_buf(), addr).await;
    let config = McpServerConfig {
        risk: Default::default(),
        cache: None,
        name: "ws".into(),
        description: "files".into(),
        transport: McpTransport::Http {
            url: format!("http://{addr}/mcp"),
            flavor: cohort::mcp::HttpFlavor::Auto,
            oauth: None,
        },
        call_timeout: Duration::from_secs(30),
        connect_timeout: Duration::from_secs(10),
        file: "ws.yaml".into(),
    };
    let client = McpClient::new(
        vec![config],
        McpOptions::new(env!("CARGO_BIN_EXE_cohort"), &|_| None),
    );
    let described = client.describe("ws").await.unwrap();
    assert!(described.tool("read_file").is_some(), "{described:?}");
    client
        .call(
            "ws",
            &tool("write_file", json!({"path": "a.txt", "content": "one"})),
        )
        .await
        .unwrap();
    let read = client
        .call("ws", &tool("read_file", json!({"path": "a.txt"})))
        .await
        .unwrap();
    assert!(read.to_string().contains("one"));
    let bad = client
        .call("ws", &tool("read_file", json!({"path": "../x"})))
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("outside"), "{bad}");

    // The server goes away: the call fails in seconds, well before its 30 s timeout.
    stop.send(()).unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = Instant::now();
    let gone = client
        .call("ws", &tool("read_file", json!({"path": "a.txt"})))
        .await;
    assert!(gone.is_err());
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "failed only after {:?}",
        started.elapsed()
    );

    // Back on the same address: the next calls reconnect.
    let _stop = serve(root.to_path_buf(), addr).await;
    let mut last = None;
    for _ in 0..20 {
        match client
            .call("ws", &tool("read_file", json!({"path": "a.txt"})))
            .await
        {
            Ok(v) => {
                assert!(v.to_string().contains("one"));
                last = None;
                break;
            }
            Err(e) => last = Some(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(last.is_none(), "never reconnected: {last:?}");
    client.shutdown().await;
}
