//! The websocket monitor feed over a real socket (`serve` on 127.0.0.1:0, tokio-tungstenite
//! clients): snapshot first, then every later event once and in order; the Origin and token
//! checks; and a client that never reads cannot slow the runtime down.

use crate::support::api_team;

use api_team::*;
use cohort::actors::{GetAgentState, Team};
use cohort::api::{ApiState, FeedConfig, serve};
use cohort::event::{Change, TaskChange};
use cohort::monitor::StateKind;
use cohort::state::TaskState;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream, connect_async};

type Client = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

struct Server {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    done: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    async fn start(state: ApiState) -> Server {
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
        }
    }

    fn url(&self, token: &str) -> String {
        format!("ws://{}/ws?token={token}", self.addr)
    }

    async fn stop(mut self) {
        self.stop.take().unwrap().send(()).ok();
        tokio::time::timeout(Duration::from_secs(10), self.done)
            .await
            .expect("the server stops on its shutdown signal")
            .unwrap()
            .unwrap();
    }
}

/// The next JSON frame (skipping pings), within ten seconds.
async fn next_json(c: &mut Client) -> Value {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(10), c.next())
            .await
            .expect("a frame within 10 s")
            .expect("the socket is open")
            .expect("a valid frame");
        match m {
            Message::Text(t) => return serde_json::from_str(t.as_str()).unwrap(),
            Message::Ping(_) | Message::Pong(_) => continue,
            other => panic!("unexpected frame {other:?}"),
        }
    }
}

/// The HTTP status a refused handshake answered with.
async fn refused(req: impl IntoClientRequest + Unpin) -> u16 {
    match connect_async(req).await {
        Err(tungstenite::Error::Http(res)) => res.status().as_u16(),
        Err(e) => panic!("refused for another reason: {e}"),
        Ok(_) => panic!("the handshake was accepted"),
    }
}

/// A change that (re)creates task `id` with `intention`.
fn task(id: &str, intention: &str) -> Vec<Change> {
    vec![Change::Task(TaskChange::Created {
        task: Box::new(TaskState::new(
            id.into(),
            "probe".into(),
            intention.into(),
            "manager".into(),
        )),
    })]
}

/// The events of an `events` frame.
fn events(f: &Value) -> Vec<Value> {
    assert_eq!(f["type"], "events", "{f}");
    f["events"].as_array().unwrap().clone()
}

async fn setup(feed: FeedConfig) -> (Team, ApiState, String) {
    let (team, cfg) = start();
    let state = api(&team, &cfg).with_feed_config(feed);
    let token = login(&state, "alice", ALICE_PASSWORD).await;
    (team, state, token)
}

#[actix::test]
async fn a_snapshot_comes_first_then_every_later_event_once_in_version_order() {
    let (team, state, token) = setup(FeedConfig::default()).await;
    let server = Server::start(state).await;
    let monitor = team.monitor.clone();

    // Another thread publishes all along, so events race each client's subscription and
    // snapshot: none may be lost, repeated or reordered.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let publisher = std::thread::spawn({
        let (monitor, stop) = (monitor.clone(), stop.clone());
        move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                monitor.publish(task(&format!("probe-{}", i % 50), &i.to_string()));
                i += 1;
                if i.is_multiple_of(4) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        }
    });
    struct View {
        client: Client,
        version: u64,
        tasks: serde_json::Map<String, Value>,
    }
    let mut views = Vec::new();
    for _ in 0..5 {
        let (mut client, _) = connect_async(server.url(&token)).await.unwrap();
        let snap = next_json(&mut client).await;
        assert_eq!(snap["type"], "snapshot");
        for kind in ["task", "stage", "agent", "step"] {
            assert!(snap["states"][kind].is_object(), "snapshot lacks {kind}");
        }
        assert_eq!(snap["states"]["agent"]["alice"]["agent_id"], "alice");
        assert!(snap["states"]["task"][team.base_task.as_str()].is_object());
        views.push(View {
            client,
            version: snap["version"].as_u64().unwrap(),
            tasks: snap["states"]["task"].as_object().unwrap().clone(),
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    publisher.join().unwrap();
    let last = monitor.version();
    for (n, view) in views.iter_mut().enumerate() {
        while view.version < last {
            for ev in events(&next_json(&mut view.client).await) {
                let v = ev["version"].as_u64().unwrap();
                assert_eq!(
                    v,
                    view.version + 1,
                    "client {n}: events come once each, in order, with no gap"
                );
                view.version = v;
                if ev["op"] == "created" {
                    // A task starts when it is first created: that event's time is its start.
                    let mut t = ev["task"].clone();
                    let id = t["task_id"].as_str().unwrap();
                    t["started_at"] = view
                        .tasks
                        .get(id)
                        .map_or(ev["at"].clone(), |old| old["started_at"].clone());
                    view.tasks
                        .insert(t["task_id"].as_str().unwrap().to_owned(), t);
                }
            }
        }
        // What the client pieced together is what the monitor holds.
        for (id, t) in monitor.snapshot(StateKind::Task) {
            assert_eq!(view.tasks.get(&id), Some(&t), "client {n}: task {id}");
        }
    }

    // And later events are pushed as they happen.
    monitor.publish(task("live", "now"));
    for view in &mut views {
        let ev = events(&next_json(&mut view.client).await);
        assert_eq!(
            (
                ev[0]["kind"].as_str(),
                ev[0]["task"]["task_id"].as_str(),
                ev[0]["version"].as_u64()
            ),
            (Some("task"), Some("live"), Some(last + 1))
        );
    }
    server.stop().await;
}

#[actix::test]
async fn browsers_from_other_origins_and_clients_without_a_valid_token_are_refused() {
    let (_team, state, token) = setup(FeedConfig::default()).await;
    let server = Server::start(state).await;

    let mut evil = server.url(&token).into_client_request().unwrap();
    evil.headers_mut()
        .insert("origin", "http://evil.example".parse().unwrap());
    assert_eq!(refused(evil).await, 403);
    assert_eq!(
        refused(format!("ws://{}/ws", server.addr)).await,
        401,
        "no token"
    );
    assert_eq!(refused(server.url("forged")).await, 401, "a forged token");

    // The console's own origin, and non-browser clients (no Origin), get in.
    let mut console = server.url(&token).into_client_request().unwrap();
    console
        .headers_mut()
        .insert("origin", "http://console.test".parse().unwrap());
    let (mut c, _) = connect_async(console).await.unwrap();
    assert_eq!(next_json(&mut c).await["type"], "snapshot");
    let (mut c2, _) = connect_async(server.url(&token)).await.unwrap();
    assert_eq!(next_json(&mut c2).await["type"], "snapshot");
    server.stop().await;
}

#[actix::test]
async fn a_client_that_never_reads_cannot_slow_the_runtime() {
    let feed = FeedConfig {
        send_timeout: Duration::from_secs(1),
        ..FeedConfig::default()
    };
    let (team, state, token) = setup(feed).await;
    let server = Server::start(state).await;
    let monitor = team.monitor.clone();

    // The stalled client: connects, then never reads again. Its receive buffer is pinned
    // small, so the kernel cannot soak up the load on its behalf (Linux grows it otherwise).
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    let stream = socket.connect(server.addr).await.unwrap();
    let (stalled, _) = tokio_tungstenite::client_async(server.url(&token), stream)
        .await
        .unwrap();
    // A healthy client, read by its own task.
    let (mut healthy, _) = connect_async(server.url(&token)).await.unwrap();
    assert_eq!(next_json(&mut healthy).await["type"], "snapshot");
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let reader = tokio::spawn(async move {
        while let Some(Ok(m)) = healthy.next().await {
            if let Message::Text(t) = m {
                let f: Value = serde_json::from_str(t.as_str()).unwrap();
                if seen_tx.send(f).is_err() {
                    break;
                }
            }
        }
    });

    // 1,000 events of 16 KiB: far more than the socket buffers of a client that never reads.
    let blob = "x".repeat(16 * 1024);
    let started = Instant::now();
    for i in 0..1_000 {
        monitor.publish(task(&format!("load-{}", i % 10), &format!("{i}{blob}")));
    }
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "publishing never waits for clients (took {:?})",
        started.elapsed()
    );
    let last = monitor.version();

    // The healthy client gets everything up to the last event (as events, or as a fresh
    // snapshot if it fell behind), then live events again.
    let mut reached = false;
    while !reached {
        let f = tokio::time::timeout(Duration::from_secs(30), seen_rx.recv())
            .await
            .expect("the healthy client keeps receiving")
            .unwrap();
        reached = f["type"] == "events"
            && events(&f).last().and_then(|e| e["version"].as_u64()) == Some(last)
            || f["type"] == "snapshot" && f["version"].as_u64() >= Some(last);
    }
    monitor.publish(task("after", "done"));
    let f = tokio::time::timeout(Duration::from_secs(10), seen_rx.recv())
        .await
        .expect("a live event after the load")
        .unwrap();
    assert_eq!(events(&f)[0]["task"]["task_id"], "after");

    // The actors never noticed.
    let alice = team.agents[&"alice".into()].clone();
    tokio::time::timeout(Duration::from_secs(5), alice.send(GetAgentState))
        .await
        .expect("the team answers promptly")
        .unwrap();

    // The server gave up on the stalled client (one that reads again before the send timeout
    // is merely slow, so give the timeout ample time to pass first): reading it now ends,
    // after whatever the kernel had buffered, in a close or a broken stream.
    tokio::time::sleep(4 * feed.send_timeout).await;
    let mut stalled = stalled;
    let ended = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stalled.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the stalled client was disconnected");

    reader.abort();
    server.stop().await;
}

#[actix::test]
async fn shutting_the_server_down_closes_open_feeds() {
    let (_team, state, token) = setup(FeedConfig::default()).await;
    let server = Server::start(state).await;
    let (mut c, _) = connect_async(server.url(&token)).await.unwrap();
    assert_eq!(next_json(&mut c).await["type"], "snapshot");
    server.stop().await;
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match c.next().await {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => break,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the feed closed with the server");
    let _ = c.send(Message::Close(None)).await;
}

#[actix::test]
async fn logging_out_closes_that_sessions_feeds_and_no_other() {
    let (_team, state, token) = setup(FeedConfig::default()).await;
    let other = login(&state, "alice", ALICE_PASSWORD).await;
    let server = Server::start(state.clone()).await;
    let (mut mine, _) = connect_async(server.url(&token)).await.unwrap();
    let (mut kept, _) = connect_async(server.url(&other)).await.unwrap();
    assert_eq!(next_json(&mut mine).await["type"], "snapshot");
    assert_eq!(next_json(&mut kept).await["type"], "snapshot");
    let req = axum::http::Request::post("/api/logout")
        .header("authorization", format!("Bearer {token}"))
        .body(axum::body::Body::empty())
        .unwrap();
    let res = tower::ServiceExt::oneshot(cohort::api::router(state.clone()), req)
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let close = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match mine.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                None | Some(Err(_)) => return None,
                Some(Ok(_)) => {}
            }
        }
    })
    .await
    .expect("the logged-out feed closed");
    let frame = close.expect("with a close frame");
    assert_eq!(u16::from(frame.code), 1008);
    assert!(frame.reason.contains("session ended"), "{}", frame.reason);
    // The person's other session keeps its feed.
    let still = tokio::time::timeout(Duration::from_millis(300), kept.next()).await;
    assert!(
        !matches!(still, Ok(None | Some(Ok(Message::Close(_))) | Some(Err(_)))),
        "the other session's feed stays open"
    );
    let _ = kept.send(Message::Close(None)).await;
    server.stop().await;
}

/// The server's end of a connection sends small frames at once (TCP_NODELAY): without it a
/// change waits for the client's delayed ACK, up to 40 ms. Found among this process's own
/// sockets as the one whose peer is the client.
#[actix::test]
async fn the_servers_end_of_a_feed_sends_small_frames_without_delay() {
    use std::os::fd::FromRawFd;
    let (_team, state, token) = setup(FeedConfig::default()).await;
    let server = Server::start(state).await;
    let (mut c, _) = connect_async(server.url(&token)).await.unwrap();
    assert_eq!(next_json(&mut c).await["type"], "snapshot");
    let client_addr = match c.get_ref() {
        MaybeTlsStream::Plain(s) => s.local_addr().unwrap(),
        _ => unreachable!("a plain ws:// connection"),
    };
    let mut found = None;
    for entry in std::fs::read_dir("/proc/self/fd").unwrap().flatten() {
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"));
        let Some(fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if !is_socket {
            continue;
        }
        // SAFETY: borrowed only for two getsockopt-style calls; ManuallyDrop never closes it.
        let s = std::mem::ManuallyDrop::new(unsafe { std::net::TcpStream::from_raw_fd(fd) });
        if s.peer_addr().is_ok_and(|p| p == client_addr) {
            found = Some(s.nodelay().unwrap());
        }
    }
    assert_eq!(found, Some(true), "the server's socket has TCP_NODELAY set");
    let _ = c.send(Message::Close(None)).await;
    server.stop().await;
}

#[actix::test]
async fn a_members_feed_carries_only_their_tasks_until_they_join_another() {
    let (team, cfg) = start();
    let state = api(&team, &cfg);
    let bob = login(&state, "bob", BOB_PASSWORD).await;
    let server = Server::start(state).await;
    let monitor = team.monitor.clone();
    monitor.publish(task("secret", "alice's plan"));
    let (mut client, _) = connect_async(server.url(&bob)).await.unwrap();
    let snap = next_json(&mut client).await;
    assert_eq!(snap["type"], "snapshot");
    let tasks: Vec<_> = snap["states"]["task"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(
        tasks,
        [team.base_task.to_string()],
        "only the base task, his group"
    );

    // Work in a task he is not in never reaches him; work in his own does.
    monitor.publish(task("secret-2", "more of alice's plans"));
    monitor.publish(vec![Change::Task(TaskChange::Tokens {
        task_id: team.base_task.clone(),
        usage: Default::default(),
    })]);
    let frame = next_json(&mut client).await;
    let evs = events(&frame);
    assert_eq!(evs.len(), 1, "{frame}");
    assert_eq!(evs[0]["task_id"], team.base_task.as_str());

    // Once the manager adds him to a task, he gets it whole (a fresh snapshot).
    monitor.publish(vec![Change::Task(TaskChange::Joined {
        task_id: "secret".into(),
        agents: vec!["bob".into()],
    })]);
    let snap = next_json(&mut client).await;
    assert_eq!(snap["type"], "snapshot", "{snap}");
    assert!(snap["states"]["task"]["secret"].is_object());
    assert!(snap["states"]["task"]["secret-2"].is_null());
    server.stop().await;
}
