//! The long-running scenarios: a served team given goal after goal over real HTTP (does the
//! time per goal and the memory stay flat?), and the websocket monitor under load (many
//! clients, a steady stream of changes, one client that never reads).

use super::scenarios::{Figures, rss_mib};
use super::team::{Scratch, TeamShape, write_team};
use crate::actors::{Host, start_team};
use crate::api::ApiState;
use crate::config::load_team;
use crate::event::{Change, TaskChange};
use crate::state::{ExecutionState, TokenUsage};
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub(super) const PASSWORD: &str = "bench-password";

pub(super) struct Served {
    pub(super) team: crate::actors::Team,
    pub(super) addr: std::net::SocketAddr,
    pub(super) stop: Option<tokio::sync::oneshot::Sender<()>>,
    pub(super) token: String,
}

/// Starts the team and its HTTP API on 127.0.0.1:0 and logs the operator in over HTTP. The
/// one operator may hold `feeds` websocket connections.
pub(super) async fn start_served(
    cfg: &crate::config::TeamConfig,
    feeds: usize,
    web: Option<std::path::PathBuf>,
) -> Result<Served, String> {
    let vars = |_: &str| None;
    let host = Host::new(&vars, std::env::current_exe().unwrap_or_default());
    let team = start_team(cfg, &host).map_err(|e| e.to_string())?;
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    let state = ApiState::new(&team, &cfg.humans, web, vec!["*".into()])
        .with_http(cfg.http.clone())
        .with_feed_config(crate::api::FeedConfig {
            max_per_human: feeds,
            max_total: feeds,
            ..Default::default()
        });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    // As `cohort serve` runs it: on a runtime of its own, beside the actors.
    crate::serve::spawn_http(listener, state, async move {
        let _ = stopped.await;
    })
    .map_err(|e| e.to_string())?;
    let token = super::client::Client::login(addr).await?.token;
    Ok(Served {
        team,
        addr,
        stop: Some(stop),
        token,
    })
}

pub(super) fn team_with_operator(
    name: &str,
    shape: TeamShape,
) -> Result<(Scratch, crate::config::TeamConfig), String> {
    let scratch = Scratch::new(name).map_err(|e| e.to_string())?;
    let hash = crate::auth::hash_password(PASSWORD)?;
    let file = write_team(&scratch.0, shape, Some(&hash)).map_err(|e| e.to_string())?;
    let cfg = load_team(&file).map_err(|e| e.to_string())?;
    Ok((scratch, cfg))
}

/// `goals` goals in a row, each sent by the operator over REST and followed until its task is
/// finished: the time per goal and the memory, early and late.
pub fn goals(goals: usize) -> Figures {
    let shape = TeamShape {
        workers: 1,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 64,
        goals,
    };
    let (_scratch, cfg) = team_with_operator("goals", shape)?;
    let system = actix::System::new();
    system.block_on(async move {
        let mut s = start_served(&cfg, 1, None).await?;
        let http = reqwest::Client::new();
        let mut events = s.team.monitor.subscribe();
        let base = s.team.base_task.clone();
        let mut took = Vec::with_capacity(goals);
        let mut rss_after_first_100 = 0.0;
        for i in 0..goals {
            let started = Instant::now();
            let r = http
                .post(format!("http://{}/api/send_message", s.addr))
                .bearer_auth(&s.token)
                .json(&json!({"human_agent_id": "operator", "task_id": base,
                    "receiver": ["manager"], "content": format!("goal {i}"), "need_reply": false}))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            if !r.status().is_success() {
                return Err(format!("goal {i}: {}", r.text().await.unwrap_or_default()));
            }
            // The goal is done when a task (not the base task) finishes.
            let deadline = tokio::time::sleep(Duration::from_secs(60));
            tokio::pin!(deadline);
            loop {
                tokio::select! {
                    ev = events.recv() => match ev {
                        Ok(ev) => if let Change::Task(TaskChange::State {
                            task_id,
                            execution_state: ExecutionState::Finished,
                            ..
                        }) = &ev.event.change
                            && *task_id != base
                        {
                            break;
                        },
                        Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                        Err(e) => return Err(e.to_string()),
                    },
                    _ = &mut deadline => return Err(format!("goal {i} did not finish within 60 s")),
                }
            }
            took.push(started.elapsed().as_secs_f64() * 1000.0);
            if i + 1 == goals.min(100) {
                rss_after_first_100 = rss_mib().1;
            }
        }
        let rss_at_end = rss_mib().1;
        let window = goals.min(100);
        let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
        let first = mean(&took[..window]);
        let last = mean(&took[took.len() - window..]);
        let tasks_in_memory = s.team.monitor.read(|st| st.tasks.len());
        if let Some(stop) = s.stop.take() {
            let _ = stop.send(());
        }
        s.team.shutdown().await;
        Ok(json!({
            "goals": goals,
            "first_ms_per_goal": first,
            "last_ms_per_goal": last,
            "rss_after_first_100_mib": rss_after_first_100,
            "rss_at_end_mib": rss_at_end,
            "tasks_in_memory": tasks_in_memory,
        }))
    })
}

/// `clients` websocket clients while the team publishes `rate` changes a second for `seconds`;
/// one more client never reads. The change-to-client latency is measured by ten of them.
pub fn websocket(clients: usize, rate: usize, seconds: u64) -> Figures {
    let shape = TeamShape {
        workers: 1,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 64,
        goals: 1,
    };
    let (_scratch, cfg) = team_with_operator("ws", shape)?;
    // The clients read on threads of their own, as browsers would: on the publisher's
    // thread they would measure their own queueing rather than the server's.
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    let client_rt = client_rt.handle().clone();
    let system = actix::System::new();
    system.block_on(async move {
        // Every client plus the stalled one (a person's default limit is 8 feeds).
        let mut s = start_served(&cfg, clients + 1, None).await?;
        let url = format!("ws://{}/ws?token={}", s.addr, s.token);
        let probes = Arc::new(Probes::new(rate * seconds as usize));
        let mut readers = Vec::new();
        let (lat_tx, mut lat_rx) = tokio::sync::mpsc::unbounded_channel::<Vec<u64>>();
        let measuring = clients.min(10);
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<bool>();
        for c in 0..clients {
            let lat_tx = (c < measuring).then(|| lat_tx.clone());
            let reader = ws_reader(url.clone(), probes.clone(), ready_tx.clone(), lat_tx);
            readers.push(client_rt.spawn(reader));
        }
        drop(lat_tx);
        drop(ready_tx);
        for _ in 0..clients {
            if ready_rx.recv().await != Some(true) {
                return Err(format!("a client could not connect to {url}"));
            }
        }
        let _stalled = connect_stalled(s.addr, &url).await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let publish_seconds = publish_probes(&s.team.monitor, &probes, rate).await;
        let total = probes.total();
        let (all, complete) = latencies(&mut lat_rx, total).await;
        let pct = |q: f64| {
            all.get(((all.len() as f64 - 1.0) * q).round() as usize)
                .map_or(f64::NAN, |ns| *ns as f64 / 1e6)
        };
        let (peak, _) = rss_mib();
        let complete = complete == measuring;
        for r in readers {
            r.abort();
        }
        if let Some(stop) = s.stop.take() {
            let _ = stop.send(());
        }
        Ok(json!({
            "clients": clients,
            "events": total,
            "events_per_s": total as f64 / publish_seconds,
            "p50_ms": pct(0.5),
            "p95_ms": pct(0.95),
            "p99_ms": pct(0.99),
            "every_event_reached_every_measuring_client": complete,
            "peak_rss_mib": peak,
        }))
    })
}

/// The changes the websocket scenario publishes, and when each was published.
struct Probes {
    origin: Instant,
    /// When each probe was published, in nanoseconds since `origin`.
    published: Vec<AtomicU64>,
}

impl Probes {
    fn new(total: usize) -> Self {
        Probes {
            origin: Instant::now(),
            published: (0..total).map(|_| Default::default()).collect(),
        }
    }

    fn total(&self) -> usize {
        self.published.len()
    }

    fn now(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
}

/// One websocket client: connects (saying on `ready` whether it could), then reads every
/// frame; a measuring one (with `latencies`) sends how long each probe took to reach it.
async fn ws_reader(
    url: String,
    probes: Arc<Probes>,
    ready: tokio::sync::mpsc::UnboundedSender<bool>,
    latencies: Option<tokio::sync::mpsc::UnboundedSender<Vec<u64>>>,
) {
    use futures::StreamExt;
    use tokio_tungstenite::tungstenite::Message;
    let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&url).await else {
        let _ = ready.send(false);
        return;
    };
    let _ = ready.send(true);
    drop(ready);
    let mut got = Vec::new();
    while let Some(Ok(m)) = ws.next().await {
        let Message::Text(t) = m else { continue };
        if latencies.is_none() || !t.as_str().starts_with(r#"{"type":"events""#) {
            continue;
        }
        let now = probes.now();
        // The probes are the only token changes; their sequence number is their
        // prompt_tokens (a scan, not a parse: the clients share the cores with
        // the server they measure).
        for part in t.as_str().split("\"prompt_tokens\":").skip(1) {
            let digits: String = part.chars().take_while(char::is_ascii_digit).collect();
            let Ok(seq) = digits.parse::<usize>() else {
                continue;
            };
            if let Some(p) = probes.published.get(seq) {
                let at = p.load(Ordering::Relaxed);
                got.push(now.saturating_sub(at));
            }
        }
        if got.len() >= probes.total() {
            break;
        }
    }
    if let Some(tx) = latencies {
        let _ = tx.send(got);
    }
}

/// The measuring clients' latencies (waiting at most 30 s for them), sorted, and how many
/// clients saw every one of the `total` probes.
async fn latencies(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<Vec<u64>>,
    total: usize,
) -> (Vec<u64>, usize) {
    let mut all = Vec::new();
    let mut complete = 0;
    let collect = async {
        while let Some(v) = rx.recv().await {
            if v.len() == total {
                complete += 1;
            }
            all.extend(v);
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(30), collect).await;
    all.sort_unstable();
    (all, complete)
}

/// The stalled client: connected, then never reads (a small receive buffer, soon full).
async fn connect_stalled(
    addr: std::net::SocketAddr,
    url: &str,
) -> Result<tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>, String> {
    let socket = tokio::net::TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket
        .set_recv_buffer_size(16 * 1024)
        .map_err(|e| e.to_string())?;
    let stream = socket.connect(addr).await.map_err(|e| e.to_string())?;
    let (stalled, _) = tokio_tungstenite::client_async(url, stream)
        .await
        .map_err(|e| e.to_string())?;
    Ok(stalled)
}

/// The load: `rate` small changes a second, in 1 ms ticks, each probe's time noted as it is
/// published; returns the seconds it took.
async fn publish_probes(monitor: &crate::monitor::Monitor, probes: &Probes, rate: usize) -> f64 {
    let total = probes.total();
    let per_tick = (rate / 1000).max(1);
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    let mut seq = 0usize;
    let started = Instant::now();
    while seq < total {
        tick.tick().await;
        let mut batch = Vec::with_capacity(per_tick);
        for _ in 0..per_tick.min(total - seq) {
            probes.published[seq].store(probes.now(), Ordering::Relaxed);
            batch.push(Change::Agent(crate::event::AgentChange::Tokens {
                agent_id: "manager".into(),
                usage: TokenUsage::new(seq as u64, 0),
            }));
            seq += 1;
        }
        monitor.publish(batch);
    }
    started.elapsed().as_secs_f64()
}
