//! Unit tests of the websocket feed loop, over in-memory sinks and streams (no socket).
use super::*;
use cohort_core::event::{Change, TaskChange};
use cohort_core::state::TaskState;
use futures::channel::mpsc;
use serde_json::Value;
use std::pin::Pin;
use std::task::{Context, Poll};

/// A feed's viewer who sees the whole team.
fn operator(id: &AgentId) -> Viewer<'_> {
    Viewer {
        id,
        access: Access::Operator,
        base: None,
    }
}

fn cfg(ms: u64) -> FeedConfig {
    FeedConfig {
        send_timeout: Duration::from_millis(ms),
        ..FeedConfig::default()
    }
}

fn me() -> AgentId {
    "alice".into()
}

/// A change that puts a task `id` with `n` in its summary into the states.
fn task(id: &str, n: u64) -> Vec<Change> {
    let mut t = TaskState::new(id.into(), "n".into(), "i".into(), "m".into());
    t.task_summary = Some(n.to_string());
    vec![Change::Task(TaskChange::Created { task: Box::new(t) })]
}

/// The events of a frame, or the frame itself if it is a snapshot.
fn events(f: &Value) -> Vec<Value> {
    match f["type"].as_str() {
        Some("events") => f["events"].as_array().unwrap().clone(),
        _ => vec![f.clone()],
    }
}

fn text(m: Message) -> Value {
    match m {
        Message::Text(t) => serde_json::from_str(t.as_str()).unwrap(),
        other => panic!("not a text frame: {other:?}"),
    }
}

/// A client that never reads: every send stays pending.
struct Stuck;
impl Sink<Message> for Stuck {
    type Error = ();
    fn poll_ready(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Pending
    }
    fn start_send(self: Pin<&mut Self>, _: Message) -> Result<(), ()> {
        Ok(())
    }
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Pending
    }
    fn poll_close(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
        Poll::Ready(Ok(()))
    }
}

fn silent() -> futures::stream::Pending<Result<Message, ()>> {
    futures::stream::pending()
}

#[tokio::test]
async fn a_snapshot_comes_first_then_each_later_event_once_in_order() {
    let m = Monitor::new(64);
    m.publish(task("t1", 1));
    m.publish(task("t2", 2));
    let (tx, mut rx) = mpsc::channel(64);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg(5_000), closing).await }
    });
    let snap = text(rx.next().await.unwrap());
    assert_eq!(snap["type"], "snapshot");
    assert_eq!(snap["version"], 2);
    assert_eq!(snap["states"]["task"]["t1"]["task_summary"], "1");
    assert_eq!(snap["states"]["task"]["t2"]["task_summary"], "2");
    for i in 3..=6 {
        m.publish(task(&format!("t{i}"), i));
    }
    let mut got = Vec::new();
    while got.len() < 4 {
        got.extend(events(&text(rx.next().await.unwrap())));
    }
    for (ev, want) in got.iter().zip(3..=6u64) {
        assert_eq!(
            (ev["kind"].as_str(), ev["op"].as_str()),
            (Some("task"), Some("created"))
        );
        assert_eq!(ev["version"], want);
        assert_eq!(ev["task"]["task_summary"], want.to_string());
    }
    feed.abort();
}

#[tokio::test(start_paused = true)]
async fn changes_within_the_frame_interval_go_out_in_one_frame() {
    let m = Monitor::new(64);
    let (tx, mut rx) = mpsc::channel(64);
    let (_close, closing) = watch::channel(None);
    let cfg = FeedConfig {
        frame_interval: Duration::from_millis(200),
        ..cfg(5_000)
    };
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg, closing).await }
    });
    assert_eq!(text(rx.next().await.unwrap())["type"], "snapshot");
    m.publish(task("t1", 1));
    // The feed has the first change by now, and holds it for the rest of the interval.
    tokio::time::sleep(Duration::from_millis(50)).await;
    m.publish(task("t2", 2));
    m.publish(task("t3", 3));
    let versions: Vec<_> = events(&text(rx.next().await.unwrap()))
        .iter()
        .map(|e| e["version"].as_u64().unwrap())
        .collect();
    assert_eq!(versions, [1, 2, 3]);
    feed.abort();
}

#[tokio::test]
async fn events_already_in_the_snapshot_are_not_sent_again() {
    let m = Monitor::new(64);
    // Subscribed first, as run_feed does: these three are both queued and in the snapshot.
    let events_rx = m.subscribe();
    for i in 1..=3 {
        m.publish(task(&format!("t{i}"), i));
    }
    let (tx, mut rx) = mpsc::channel(64);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move {
            feed_from(
                events_rx,
                tx,
                silent(),
                &m,
                operator(&me()),
                cfg(5_000),
                closing,
            )
            .await
        }
    });
    let snap = text(rx.next().await.unwrap());
    assert_eq!(snap["version"], 3);
    assert_eq!(snap["states"]["task"].as_object().unwrap().len(), 3);
    m.publish(task("t4", 4));
    let ev = events(&text(rx.next().await.unwrap()));
    assert_eq!(ev.len(), 1);
    assert_eq!(
        ev[0]["version"], 4,
        "the first event after the snapshot comes next"
    );
    feed.abort();
}

#[tokio::test]
async fn a_lagging_client_gets_a_fresh_snapshot_instead_of_the_missed_events() {
    let m = Monitor::new(16);
    // Room for the snapshot and a frame; then the feed waits on the client.
    let (tx, mut rx) = mpsc::channel(1);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg(5_000), closing).await }
    });
    let first = text(rx.next().await.unwrap());
    assert_eq!(
        (first["type"].as_str(), first["version"].as_u64()),
        (Some("snapshot"), Some(0))
    );
    for i in 1..=200u64 {
        m.publish(task(&format!("t{i}"), i));
    }
    let mut frames = vec![first];
    loop {
        let f = text(rx.next().await.unwrap());
        let done = f["type"] == "snapshot" && f["version"] == 200
            || events(&f).last().is_some_and(|e| e["version"] == 200);
        frames.push(f);
        if done {
            break;
        }
    }
    let snapshots = frames.iter().filter(|f| f["type"] == "snapshot").count();
    assert!(snapshots >= 2, "the lag was answered with a new snapshot");
    let replayed: usize = frames
        .iter()
        .filter(|f| f["type"] == "events")
        .map(|f| events(f).len())
        .sum();
    assert!(replayed < 60, "the missed events were not replayed");
    // Nothing is lost: the last snapshot and the events after it hold every task.
    let last = frames
        .iter()
        .rposition(|f| f["type"] == "snapshot")
        .unwrap();
    let mut tasks = frames[last]["states"]["task"].as_object().unwrap().len();
    let mut version = frames[last]["version"].as_u64().unwrap();
    for f in &frames[last + 1..] {
        for e in events(f) {
            assert!(e["version"].as_u64().unwrap() > version, "in order, once");
            version = e["version"].as_u64().unwrap();
            tasks += 1;
        }
    }
    assert_eq!(tasks, 200);
    feed.abort();
}

#[tokio::test]
async fn events_waiting_for_a_client_go_out_in_one_frame() {
    let m = Monitor::new(1024);
    let (tx, mut rx) = mpsc::channel(1);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg(5_000), closing).await }
    });
    text(rx.next().await.unwrap());
    for i in 1..=50u64 {
        m.publish(task(&format!("t{i}"), i));
    }
    let mut frames = 0;
    let mut n = 0;
    while n < 50 {
        n += events(&text(rx.next().await.unwrap())).len();
        frames += 1;
    }
    assert!(frames < 50, "{frames} frames for 50 events");
    feed.abort();
}

#[tokio::test]
async fn a_persons_private_changes_reach_only_their_own_feed() {
    use cohort_core::event::AgentChange;
    let m = Monitor::new(64);
    let (tx, mut rx) = mpsc::channel(64);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg(5_000), closing).await }
    });
    text(rx.next().await.unwrap());
    let notice = |who: &str| {
        vec![Change::Agent(AgentChange::Notice {
            agent_id: who.into(),
            text: format!("for {who}"),
        })]
    };
    m.publish(notice("bob"));
    m.publish(notice("alice"));
    m.publish(task("t", 1));
    let mut got = Vec::new();
    while got.len() < 2 {
        got.extend(events(&text(rx.next().await.unwrap())));
    }
    assert_eq!(got[0]["text"], "for alice");
    assert_eq!(got[1]["op"], "created");
    feed.abort();
}

#[tokio::test]
async fn a_stalled_client_is_dropped_and_never_blocks_publishing() {
    let m = Monitor::new(16);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(Stuck, silent(), &m, operator(&me()), cfg(50), closing).await }
    });
    for i in 0..1_000 {
        m.publish(task(&format!("t{i}"), i));
    }
    assert_eq!(feed.await.unwrap(), FeedEnd::Stalled);
}

#[tokio::test]
async fn the_feed_ends_when_the_client_closes_or_the_server_shuts_down() {
    let m = Monitor::new(16);
    let (tx, _rx) = mpsc::channel(8);
    let (_close, closing) = watch::channel(None);
    let incoming = futures::stream::iter([Ok::<_, ()>(Message::Close(None))]);
    assert_eq!(
        run_feed(tx, incoming, &m, operator(&me()), cfg(1_000), closing).await,
        FeedEnd::ClientGone
    );
    let (tx, _rx) = mpsc::channel(8);
    let (close, closing) = watch::channel(None);
    close.send_replace(Some(Closing::ServerDown));
    assert_eq!(
        run_feed(tx, silent(), &m, operator(&me()), cfg(1_000), closing).await,
        FeedEnd::ServerClosing
    );
}

#[test]
fn origins_must_be_listed_when_present() {
    let allowed = vec!["http://localhost:8080".to_owned()];
    let mut h = HeaderMap::new();
    assert!(
        check_origin(&h, &allowed).is_ok(),
        "no Origin: not a browser"
    );
    h.insert(header::ORIGIN, "http://localhost:8080".parse().unwrap());
    assert!(check_origin(&h, &allowed).is_ok());
    h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
    assert!(check_origin(&h, &allowed).is_err());
    assert!(check_origin(&h, &["*".to_owned()]).is_ok());
}

#[tokio::test]
async fn an_answer_being_written_reaches_the_feed_beside_the_events() {
    let m = Monitor::new(64);
    let (tx, mut rx) = mpsc::channel(64);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg(5_000), closing).await }
    });
    assert_eq!(text(rx.next().await.unwrap())["type"], "snapshot");
    // The feed subscribes to answers being written once its snapshot is out.
    let mut frame = Value::Null;
    for _ in 0..100 {
        m.writing(&"w".into(), &"s1".into(), "<think>Cold ra");
        if let Ok(Some(f)) = tokio::time::timeout(Duration::from_millis(20), rx.next()).await {
            frame = text(f);
            break;
        }
    }
    assert_eq!(frame["type"], "writing", "{frame}");
    assert_eq!(frame["step_id"], "s1");
    assert_eq!(frame["agent_id"], "w");
    assert_eq!(frame["text"], "<think>Cold ra");
    assert_eq!(frame["cut"], false);
    // Change events still flow, as ever.
    m.publish(task("t1", 1));
    let mut next = text(rx.next().await.unwrap());
    while next["type"] == "writing" {
        next = text(rx.next().await.unwrap());
    }
    assert_eq!(events(&next)[0]["op"], "created");
    feed.abort();
}

#[tokio::test(start_paused = true)]
async fn a_client_that_answers_pings_stays_and_one_silent_for_three_is_let_go() {
    let m = Monitor::new(16);
    let cfg = FeedConfig {
        ping: Duration::from_secs(30),
        ..cfg(1_000)
    };
    // Silent: pinged at 30, 60 and 90 s, then closed as gone.
    let (tx, mut rx) = mpsc::channel(16);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, silent(), &m, operator(&me()), cfg, closing).await }
    });
    assert_eq!(text(rx.next().await.unwrap())["type"], "snapshot");
    for _ in 0..2 {
        assert!(matches!(rx.next().await.unwrap(), Message::Ping(_)));
    }
    match rx.next().await.unwrap() {
        Message::Close(Some(f)) => assert_eq!(f.code, close_code::AWAY),
        other => panic!("{other:?}"),
    }
    assert_eq!(feed.await.unwrap(), FeedEnd::Silent);
    // A client whose pongs come back is pinged on and kept.
    let (tx, mut rx) = mpsc::channel(16);
    let (pong, pongs) = mpsc::channel::<Result<Message, ()>>(16);
    let (_close, closing) = watch::channel(None);
    let feed = tokio::spawn({
        let m = m.clone();
        async move { run_feed(tx, pongs, &m, operator(&me()), cfg, closing).await }
    });
    assert_eq!(text(rx.next().await.unwrap())["type"], "snapshot");
    for _ in 0..6 {
        assert!(matches!(rx.next().await.unwrap(), Message::Ping(_)));
        pong.clone()
            .try_send(Ok(Message::Pong(Default::default())))
            .unwrap();
    }
    assert!(!feed.is_finished(), "three minutes of pongs: still there");
    feed.abort();
}
