//! The store under a flood (issue 27): a served team (`cohort serve`'s own code, on a SQLite
//! file) takes `messages` messages of `chars` characters over `POST /api/send_message`, as the
//! issue measured it (2,000 of 16 KB: 32 MB in all). Nothing is pruned while they come in;
//! then the store is compacted twice, at the default settings and keeping nothing beyond
//! recovery, and its size on disk is compared with what it must keep.

use super::scenarios::Figures;
use super::serve::team_with_operator;
use super::team::TeamShape;
use crate::actors::Host;
use crate::config::Compaction;
use crate::store::{SqlStore, Store, StoreStats};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The figures of one reading of the store.
fn sizes(st: &StoreStats) -> Value {
    json!({
        "disk_bytes": st.disk_bytes(),
        "wal_bytes": st.wal_bytes,
        "live_bytes": st.live_bytes(),
        "ratio": st.ratio(),
        "events": st.events,
        "event_bytes": st.event_bytes,
        "snapshots": st.snapshots,
        "snapshot_bytes": st.snapshot_bytes,
        "archived": st.archived,
        "archive_bytes": st.archive_bytes,
    })
}

pub fn load_store(messages: usize, chars: usize) -> Figures {
    let shape = TeamShape {
        workers: 1,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 64,
        goals: 1,
    };
    let (scratch, mut cfg) = team_with_operator("load-store", shape)?;
    // Nothing is pruned while the flood comes in: the size it reaches is "before".
    cfg.store = Compaction {
        keep_events: Duration::from_secs(87_600 * 3600),
        keep_events_bytes: 1 << 40,
        every: Duration::from_secs(86_400),
    };
    cfg.retention.message_chars = cfg.retention.message_chars.max(chars);
    let file = scratch.0.join("team.db");
    let system = actix::System::new();
    system.block_on(async move {
        let store = Arc::new(
            SqlStore::open_sqlite(&file)
                .await
                .map_err(|e| e.to_string())?,
        );
        let vars = |_: &str| None;
        let host = Host::new(&vars, std::env::current_exe().unwrap_or_default());
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let bind = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let serve = crate::serve::serve_team(
            &cfg,
            &host,
            bind,
            None,
            Some(store.clone() as Arc<dyn Store>),
            async move {
                let _ = stop_rx.await;
            },
            |addr| {
                let _ = ready_tx.send(addr);
            },
        );
        let flood = async move {
            let addr = ready_rx
                .await
                .map_err(|_| "the team did not start".to_owned())?;
            let posted = post_flood(addr, messages, chars).await;
            let _ = stop_tx.send(());
            posted
        };
        let (served, posted) = tokio::join!(serve, flood);
        served.map_err(|e| e.to_string())?;
        let seconds = posted?;
        compact_and_measure(&store, messages, chars, seconds).await
    })
}

/// Logs the operator in and posts the messages to the manager in the base task, one after
/// another (each answered once stored); returns how long that took, in seconds.
async fn post_flood(
    addr: std::net::SocketAddr,
    messages: usize,
    chars: usize,
) -> Result<f64, String> {
    let super::client::Client {
        http, token, base, ..
    } = super::client::Client::login(addr).await?;
    let token = token.as_str();
    let started = Instant::now();
    for i in 0..messages {
        let head = format!("message {i}: ");
        let content = format!("{head}{}", "x".repeat(chars.saturating_sub(head.len())));
        let r = http
            .post(format!("http://{addr}/api/send_message"))
            .bearer_auth(token)
            .json(&json!({"human_agent_id": "operator", "task_id": base,
                "receiver": ["manager"], "content": content}))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!(
                "message {i}: {}",
                r.text().await.unwrap_or_default()
            ));
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// The store as the flood left it, then compacted at the defaults, then keeping nothing
/// beyond recovery.
async fn compact_and_measure(
    store: &SqlStore,
    messages: usize,
    chars: usize,
    post_seconds: f64,
) -> Figures {
    let stats = async || store.stats().await.map_err(|e| e.to_string());
    let filled = stats().await?;
    let stop = AtomicBool::new(false);
    let mut took = Vec::new();
    let mut after = Vec::new();
    let nothing_kept = Compaction {
        keep_events: Duration::ZERO,
        keep_events_bytes: 0,
        ..Compaction::default()
    };
    for policy in [Compaction::default(), nothing_kept] {
        let t = Instant::now();
        store
            .compact(&policy, &stop)
            .await
            .map_err(|e| e.to_string())?;
        took.push(t.elapsed().as_secs_f64());
        after.push(sizes(&stats().await?));
    }
    Ok(json!({
        "messages": messages,
        "message_bytes": messages * chars,
        "post_seconds": post_seconds,
        "filled": sizes(&filled),
        "compacted_defaults": after[0],
        "compacted_defaults_seconds": took[0],
        "compacted_nothing_kept": after[1],
        "compacted_nothing_kept_seconds": took[1],
    }))
}

/// The job `cohort bench` runs (`quick`: a tenth of the messages).
pub fn job(quick: bool) -> super::Job {
    super::Job::LoadStore {
        messages: if quick { 200 } else { 2_000 },
        chars: 16 * 1024,
    }
}

/// The table's lines for the scenario's figures.
pub fn rows(v: &Value) -> Vec<super::Row> {
    let mb = |b: &Value| super::f(b) / (1024.0 * 1024.0);
    let reading = |s: &Value| {
        format!(
            "{:.1} MB / {:.1} MB ({:.1}×): {} events, {} snapshot(s), {} archived",
            mb(&s["disk_bytes"]),
            mb(&s["live_bytes"]),
            super::f(&s["ratio"]),
            s["events"],
            s["snapshots"],
            s["archived"]
        )
    };
    let name = "load_store";
    vec![
        super::row(
            name,
            format!(
                "{} messages, {:.0} MB in all, posted in {:.1} s: on disk / must keep",
                v["messages"],
                mb(&v["message_bytes"]),
                super::f(&v["post_seconds"])
            ),
            reading(&v["filled"]),
            "",
        ),
        super::row(
            name,
            format!(
                "compacted at the defaults (events kept 24 h, at most 64 MB; {:.1} s)",
                super::f(&v["compacted_defaults_seconds"])
            ),
            reading(&v["compacted_defaults"]),
            "",
        ),
        super::row(
            name,
            format!(
                "compacted keeping nothing beyond recovery (keep_events_hours 0; {:.1} s)",
                super::f(&v["compacted_nothing_kept_seconds"])
            ),
            reading(&v["compacted_nothing_kept"]),
            "≤ 3× after compaction",
        ),
    ]
}
