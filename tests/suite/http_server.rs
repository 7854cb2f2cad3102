//! The HTTP server under hostile connections, over real sockets (`serve` on 127.0.0.1:0): idle
//! and half-sent connections are closed after the header timeout (slowloris), a keep-alive
//! connection after the idle timeout, a trickled body gets 408; a login gets through while the
//! connection table is full of idle connections; a connection carries at most
//! `max_requests_per_connection` requests; the server stops at once with idle connections open.
//!
//! Every wait here is a bound on a failure ("closed within 10 s" of a 1 s timeout), never a
//! measure of speed.

use crate::support::api_team;

use api_team::*;
use cohort::actors::Team;
use cohort::api::{ApiState, serve};
use cohort::config::Http;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The longest any expected close or answer may take before the test fails.
const BOUND: Duration = Duration::from_secs(10);

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
    _team: Team,
}

/// The fixture team served with `http` on 127.0.0.1:0.
async fn serve_with(http: Http) -> Server {
    let (team, cfg) = start();
    let state: ApiState = api(&team, &cfg).with_http(http);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let done = tokio::spawn(serve(listener, state, async move {
        let _ = stopped.await;
    }));
    Server {
        addr,
        stop: Some(stop),
        done,
        _team: team,
    }
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Whether the server closes `tcp` within `within` (reads that end: EOF or reset). What it
/// sends before closing is read and dropped.
async fn closes_within(tcp: &mut TcpStream, within: Duration) -> bool {
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + within;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Err(_) => return false,
            Ok(Ok(0) | Err(_)) => return true,
            Ok(Ok(_)) => {}
        }
    }
}

/// One response on `tcp`: its head (lower-cased) and body, read by its content-length.
async fn response(tcp: &mut TcpStream) -> (String, String) {
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(BOUND, tcp.read(&mut buf))
            .await
            .expect("a response in time")
            .unwrap();
        assert!(n > 0, "closed before a whole response: {got:?}");
        got.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&got).into_owned();
        let Some((head, body)) = text.split_once("\r\n\r\n") else {
            continue;
        };
        let head = head.to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |n| n.trim().parse().unwrap());
        if body.len() >= len {
            return (head, body.to_owned());
        }
    }
}

const REQUEST: &[u8] = b"GET /api/no-such-route HTTP/1.1\r\nhost: test\r\n\r\n";

#[actix::test]
async fn idle_and_half_sent_connections_are_closed_after_the_header_timeout() {
    let s = serve_with(Http {
        header_timeout: secs(1),
        idle_timeout: secs(4),
        ..Http::default()
    })
    .await;
    // Connected, sending nothing.
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    // Slowloris: a head that never ends, a header line at a time.
    let mut slow = TcpStream::connect(s.addr).await.unwrap();
    slow.write_all(b"GET /api/states HTTP/1.1\r\nhost: test\r\n")
        .await
        .unwrap();
    let (mut slow_read, mut slow_write) = slow.into_split();
    let trickle = tokio::spawn(async move {
        for i in 0..100 {
            tokio::time::sleep(Duration::from_millis(200)).await;
            if slow_write
                .write_all(format!("x-pad-{i}: y\r\n").as_bytes())
                .await
                .is_err()
            {
                return;
            }
        }
    });
    // A keep-alive connection that made one request and then waits.
    let mut kept = TcpStream::connect(s.addr).await.unwrap();
    kept.write_all(REQUEST).await.unwrap();
    let (head, body) = response(&mut kept).await;
    assert!(head.starts_with("http/1.1 404"), "{head}");
    assert!(body.contains("no such route"), "{body}");

    assert!(
        closes_within(&mut silent, BOUND).await,
        "a silent connection"
    );
    let mut buf = [0u8; 64];
    let slow_closed = tokio::time::timeout(BOUND, slow_read.read(&mut buf)).await;
    assert!(
        matches!(slow_closed, Ok(Ok(0) | Err(_))),
        "a head trickled a line at a time: {slow_closed:?}"
    );
    trickle.abort();
    // Idle between requests it gets the idle timeout (4 s), not the header timeout (1 s).
    assert!(
        !closes_within(&mut kept, Duration::from_millis(1500)).await,
        "closed before its idle timeout"
    );
    assert!(
        closes_within(&mut kept, BOUND).await,
        "an idle keep-alive connection"
    );
}

#[actix::test]
async fn a_body_that_does_not_arrive_in_time_gets_408() {
    let s = serve_with(Http {
        header_timeout: secs(1),
        ..Http::default()
    })
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    tcp.write_all(
        b"POST /api/bind_human_agent HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\n\
          content-length: 100\r\n\r\n{\"human_agent_id\"",
    )
    .await
    .unwrap();
    let (head, body) = response(&mut tcp).await;
    assert!(head.starts_with("http/1.1 408"), "{head}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["success"], false);
    assert!(
        v["error"].as_str().unwrap().contains("did not arrive"),
        "{v}"
    );
}

#[actix::test]
async fn a_login_gets_through_while_the_table_is_full_of_idle_connections() {
    // Long timeouts: only the cap and its eviction can make room here.
    let s = serve_with(Http {
        header_timeout: secs(60),
        idle_timeout: secs(60),
        max_connections: 16,
        ..Http::default()
    })
    .await;
    let mut crowd = Vec::new();
    for i in 0..40 {
        let mut tcp = TcpStream::connect(s.addr).await.unwrap();
        if i % 2 == 1 {
            tcp.write_all(b"POST /api/bind_human_agent HTTP/1.1\r\nhost: test\r\n")
                .await
                .unwrap();
        }
        crowd.push(tcp);
    }
    let login = reqwest::Client::new()
        .post(format!("http://{}/api/bind_human_agent", s.addr))
        .json(&json!({"human_agent_id": "alice", "password": ALICE_PASSWORD}))
        .timeout(BOUND)
        .send()
        .await
        .expect("the login is answered");
    assert_eq!(login.status(), 200);
    let token: serde_json::Value = login.json().await.unwrap();
    assert!(token["token"].is_string(), "{token}");
    // The oldest made room; the newest are still open; the table never grew past its cap
    // (41 connections came, at most 16 stay).
    let mut closed = Vec::new();
    for tcp in &mut crowd {
        closed.push(closes_within(tcp, Duration::from_millis(200)).await);
    }
    assert!(closed[0] && closed[1], "the oldest were closed: {closed:?}");
    assert!(!closed[39], "the newest is still open: {closed:?}");
    let n = closed.iter().filter(|c| **c).count();
    assert!(n >= 41 - 16, "{n} closed of 40: {closed:?}");
}

#[actix::test]
async fn a_connection_carries_at_most_max_requests_per_connection() {
    let s = serve_with(Http {
        max_requests_per_connection: 2,
        ..Http::default()
    })
    .await;
    let mut tcp = TcpStream::connect(s.addr).await.unwrap();
    tcp.write_all(REQUEST).await.unwrap();
    let (first, _) = response(&mut tcp).await;
    assert!(!first.contains("connection: close"), "{first}");
    tcp.write_all(REQUEST).await.unwrap();
    let (second, _) = response(&mut tcp).await;
    assert!(second.contains("connection: close"), "{second}");
    assert!(
        closes_within(&mut tcp, BOUND).await,
        "closed after the last"
    );
}

#[actix::test]
async fn the_server_stops_at_once_with_idle_connections_open() {
    let mut s = serve_with(Http {
        header_timeout: secs(60),
        idle_timeout: secs(60),
        ..Http::default()
    })
    .await;
    let mut silent = TcpStream::connect(s.addr).await.unwrap();
    let mut kept = TcpStream::connect(s.addr).await.unwrap();
    kept.write_all(REQUEST).await.unwrap();
    response(&mut kept).await;
    s.stop.take().unwrap().send(()).unwrap();
    tokio::time::timeout(BOUND, &mut s.done)
        .await
        .expect("the server stops without waiting for idle connections")
        .unwrap()
        .unwrap();
    assert!(closes_within(&mut silent, BOUND).await);
    assert!(closes_within(&mut kept, BOUND).await);
}

/// `POST …/cancel` over a real socket as curl sends it: the reason is optional, so no body, an
/// empty body and no content type are all a cancel without a reason (never 415); a body that
/// is there is read as JSON whatever its content type says.
#[actix::test]
async fn a_cancel_needs_no_body_and_no_content_type() {
    let mut server = serve_with(Http::default()).await;
    let login = json!({"human_agent_id": "alice", "password": ALICE_PASSWORD}).to_string();
    let mut tcp = TcpStream::connect(server.addr).await.unwrap();
    let req = format!(
        "POST /api/bind_human_agent HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{login}",
        login.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let (_, body) = response(&mut tcp).await;
    let token = serde_json::from_str::<serde_json::Value>(&body).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let base = server._team.base_task.clone();
    let post = |path: String, extra: &'static str, body: &'static str| {
        let token = token.clone();
        let addr = server.addr;
        async move {
            let mut tcp = TcpStream::connect(addr).await.unwrap();
            let req = format!(
                "POST {path} HTTP/1.1\r\nhost: test\r\nauthorization: Bearer {token}\r\n{extra}\r\n{body}"
            );
            tcp.write_all(req.as_bytes()).await.unwrap();
            response(&mut tcp).await
        }
    };
    let base_cancel = format!("/api/task/{base}/cancel");
    let asks: [(&str, &str, &str); 4] = [
        ("no body, no length", "", ""),
        ("an empty body", "content-length: 0\r\n", ""),
        (
            "an empty JSON body",
            "content-type: application/json\r\ncontent-length: 0\r\n",
            "",
        ),
        (
            "curl -d's form type",
            "content-type: application/x-www-form-urlencoded\r\ncontent-length: 16\r\n",
            r#"{"reason": "no"}"#,
        ),
    ];
    for (what, extra, body) in asks {
        let (head, body) = post(base_cancel.clone(), extra, body).await;
        // The route ran: the base task is refused for being the base task, not for the body.
        assert!(head.starts_with("http/1.1 409"), "{what}: {head}\n{body}");
        assert!(body.contains("base task"), "{what}: {body}");
    }
    let (head, body) = post(
        "/api/task/no-such-task/cancel".into(),
        "content-length: 0\r\n",
        "",
    )
    .await;
    assert!(head.starts_with("http/1.1 404"), "{head}\n{body}");
    let (head, body) = post(
        base_cancel,
        "content-type: application/json\r\ncontent-length: 8\r\n",
        "not json",
    )
    .await;
    assert!(head.starts_with("http/1.1 400"), "{head}\n{body}");
    assert!(body.contains("empty or a JSON object"), "{body}");
    let (head, body) = post(
        "/api/task/no-such-task/cancel".into(),
        "content-length: 3\r\n",
        "[1]",
    )
    .await;
    assert!(head.starts_with("http/1.1 422"), "{head}\n{body}");
    assert!(
        !body.contains("CancelBody") && !body.contains("struct"),
        "{body}"
    );
    server.stop.take().unwrap().send(()).unwrap();
    server.done.await.unwrap().unwrap();
}
