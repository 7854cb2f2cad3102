//! The store scenario: how many state events a second the monitor's journal commits to a
//! SQLite file, and how long one change waits for its commit when nothing else is queued.

use super::scenarios::Figures;
use super::team::Scratch;
use crate::event::{AgentChange, Change};
use crate::monitor::Monitor;
use crate::state::TokenUsage;
use crate::store::SqlStore;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

fn change(n: usize) -> Change {
    Change::Agent(AgentChange::Tokens {
        agent_id: "w".into(),
        usage: TokenUsage::new(n as u64, 1),
    })
}

/// `events` changes published `per_publish` at a time as fast as the publisher can, until all
/// are committed; then 200 single changes one after another, each awaited.
pub fn throughput(events: usize, per_publish: usize) -> Figures {
    let scratch = Scratch::new("store").map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let store = SqlStore::open_sqlite(&scratch.0.join("data.db"))
            .await
            .map_err(|e| e.to_string())?;
        let monitor = Monitor::with_store(65_536, Arc::new(store), Default::default(), 0);
        let per_publish = per_publish.max(1);
        let started = Instant::now();
        let mut last = 0;
        let mut n = 0;
        while n < events {
            let batch: Vec<Change> = (n..(n + per_publish).min(events)).map(change).collect();
            n += batch.len();
            last = monitor.publish(batch);
        }
        let published = started.elapsed().as_secs_f64();
        let ok = tokio::time::timeout(Duration::from_secs(300), monitor.durable(last))
            .await
            .unwrap_or(false);
        let committed = started.elapsed().as_secs_f64();
        let mut waits = Vec::with_capacity(200);
        for i in 0..200 {
            let t = Instant::now();
            let v = monitor.publish(vec![change(events + i)]);
            monitor.durable(v).await;
            waits.push(t.elapsed());
        }
        waits.sort_unstable();
        let ms = |q: f64| waits[((waits.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
        monitor.close();
        let bytes = std::fs::metadata(scratch.0.join("data.db")).map_or(0, |m| m.len())
            + std::fs::metadata(scratch.0.join("data.db-wal")).map_or(0, |m| m.len());
        Ok(json!({
            "events": events,
            "per_publish": per_publish,
            "all_committed": ok,
            "publish_seconds": published,
            "events_per_s": events as f64 / committed,
            "commit_wait_p50_ms": ms(0.5),
            "commit_wait_p99_ms": ms(0.99),
            "bytes_per_event": bytes as f64 / (events + 200) as f64,
        }))
    })
}
