//! kill -9 at random moments: `cohort serve` on a scripted team is driven over REST (goals
//! sent, the manager's waiting questions answered) and killed with SIGKILL again and again,
//! then restarted on the same data. At the end every task is finished, and the store's own
//! record (`cohort export`) shows that nothing was lost or done twice: every task has the same
//! count of finished steps and of messages, per agent and skill, as a task that ran without a
//! kill; every goal was taken exactly once, and every acknowledged goal is there. What the API
//! showed before a kill is still there after the restart.
//!
//! The same rounds with SIGTERM instead check that a clean stop stores every change its actors
//! made. `COHORT_CRASH_KILLS` sets the number of kills of the SQLite run (default 20);
//! `scripts/crash-test` runs it with 100.

use crate::support::nats;
use crate::support::postgres;
use crate::support::scratch;

use scratch::Scratch;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Clone)]
enum Data {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Data {
    fn args(&self) -> Vec<String> {
        match self {
            Data::Sqlite(p) => vec!["--data".into(), p.display().to_string()],
            Data::Postgres(url) => vec!["--database".into(), url.clone()],
        }
    }
}

struct Server {
    child: Child,
    base: String,
    log: PathBuf,
    /// The node's name, for a node of a team across machines.
    node: Option<String>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn start(data: &Data, log: PathBuf) -> Server {
        Self::start_with(data, log, &[])
    }

    /// A node of a team across machines, named `name`, with a lease of `lease_secs`, that
    /// publishes the team's events on `nats`.
    fn start_node(data: &Data, log: PathBuf, name: &str, lease_secs: u64, nats: &str) -> Server {
        let lease = lease_secs.to_string();
        let more = ["--node", name, "--lease-secs", &lease, "--nats", nats];
        let mut s = Self::start_with(data, log, &more);
        s.node = Some(name.to_owned());
        s
    }

    fn start_with(data: &Data, log: PathBuf, more: &[&str]) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args([
                "serve",
                "--team",
                "tests/fixtures/crash/team.yaml",
                "--bind",
            ])
            .arg(format!("127.0.0.1:{port}"))
            .args(data.args())
            .args(more)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Server {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
            node: None,
        }
    }

    /// kill -9, and wait until the process is gone.
    fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }

    /// SIGTERM (a clean stop that closes the store): it exits 0, and stores every change its
    /// actors made (none is made after its journal closed).
    fn stop(mut self) {
        let pid = self.child.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "serve did not stop on SIGTERM:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        };
        let log = self.log();
        assert!(
            status.success(),
            "serve stopped with {status} on SIGTERM:\n{log}"
        );
        assert!(
            !log.contains("was not stored"),
            "a change was made after the journal closed:\n{log}"
        );
    }

    /// Ends the process as `how` says.
    fn end(self, how: End) {
        match how {
            End::Kill => self.kill(),
            End::Term => self.stop(),
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// How a round ends the server.
#[derive(Clone, Copy)]
enum End {
    /// kill -9.
    Kill,
    /// SIGTERM, checked to be a clean stop.
    Term,
}

/// A small deterministic random source (its seed is printed, so a failing run can be
/// repeated with `COHORT_CRASH_SEED`).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

fn http() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap()
}

/// Logs in as the operator once the server answers (the first run), or waits until it serves
/// and checks that the token of the first run still works (later runs).
async fn wait_up(http: &reqwest::Client, s: &mut Server, token: Option<&str>) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let r = match token {
            None => {
                http.post(format!("{}/api/bind_human_agent", s.base))
                    .json(&json!({"human_agent_id": "operator", "password": "cohort-demo"}))
                    .send()
                    .await
            }
            Some(t) => {
                http.get(format!("{}/api/states?type=task", s.base))
                    .bearer_auth(t)
                    .send()
                    .await
            }
        };
        if let Ok(r) = r {
            assert!(
                r.status().is_success(),
                "{}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            );
            return match token {
                None => r.json::<Value>().await.unwrap()["token"]
                    .as_str()
                    .unwrap()
                    .to_owned(),
                Some(t) => t.to_owned(),
            };
        }
        if let Some(status) = s.child.try_wait().unwrap() {
            panic!("serve exited ({status}) instead of serving:\n{}", s.log());
        }
        assert!(
            Instant::now() < deadline,
            "the server did not come up: {}",
            s.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(http: &reqwest::Client, base: &str, token: &str, path: &str) -> Option<Value> {
    let r = http
        .get(format!("{base}{path}"))
        .bearer_auth(token)
        .send()
        .await
        .ok()?;
    if !r.status().is_success() {
        return None;
    }
    r.json().await.ok()
}

async fn post(http: &reqwest::Client, base: &str, token: &str, body: Value) -> bool {
    match http
        .post(format!("{base}/api/send_message"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
    {
        Ok(r) => r.status().is_success(),
        Err(_) => false,
    }
}

/// Answers every question waiting for the operator.
async fn answer(http: &reqwest::Client, base: &str, token: &str) {
    let Some(p) = get(http, base, token, "/api/human/operator/pending").await else {
        return;
    };
    for q in p["pending"].as_array().into_iter().flatten() {
        post(
            http,
            base,
            token,
            json!({
                "human_agent_id": "operator",
                "task_id": q["task_id"],
                "receiver": [q["sender_id"]],
                "content": "ANSWER# blue",
                "need_reply": false,
            }),
        )
        .await;
    }
}

struct Driver {
    next_goal: AtomicUsize,
    /// Goals the API acknowledged (so stored).
    acked: Mutex<BTreeSet<usize>>,
    /// Goals to send at most (none after the kills).
    goals_up_to: AtomicUsize,
}

/// Sends goals and answers questions against `base` until `stop`.
async fn drive(
    d: Arc<Driver>,
    base: String,
    token: String,
    base_task: String,
    stop: Arc<AtomicBool>,
) {
    let http = http();
    while !stop.load(Ordering::Relaxed) {
        if d.next_goal.load(Ordering::SeqCst) < d.goals_up_to.load(Ordering::SeqCst) {
            let k = d.next_goal.fetch_add(1, Ordering::SeqCst);
            let sent = post(
                &http,
                &base,
                &token,
                json!({
                    "human_agent_id": "operator",
                    "task_id": base_task,
                    "receiver": ["manager"],
                    "content": format!("GOAL#{k} write one line"),
                    "need_reply": false,
                }),
            )
            .await;
            if sent {
                d.acked.lock().unwrap().insert(k);
            }
        }
        answer(&http, &base, &token).await;
        tokio::time::sleep(Duration::from_millis(40)).await;
    }
}

/// Drives `s` in the background until the returned flag is set.
fn start_driver(
    d: &Arc<Driver>,
    s: &Server,
    token: &str,
    base_task: &str,
) -> (Arc<AtomicBool>, tokio::task::JoinHandle<()>) {
    let stop = Arc::new(AtomicBool::new(false));
    let running = tokio::spawn(drive(
        d.clone(),
        s.base.clone(),
        token.to_owned(),
        base_task.to_owned(),
        stop.clone(),
    ));
    (stop, running)
}

/// Tasks as the API shows them: id → (name, state).
async fn tasks(http: &reqwest::Client, base: &str, token: &str) -> Option<BTreeMap<String, Value>> {
    let v = get(http, base, token, "/api/states?type=task").await?;
    Some(
        v.as_object()?
            .iter()
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect(),
    )
}

/// Waits until the base task has at least `at_least` goals, each with its task, and every task
/// is finished, answering questions meanwhile unless a driver does (two answerers could both
/// see a question before either answer lands, and answer it twice). Returns the base task's
/// goals.
async fn settle(
    http: &reqwest::Client,
    s: &Server,
    token: &str,
    base_task: &str,
    at_least: usize,
    answering: bool,
) -> usize {
    let deadline = Instant::now() + Duration::from_secs(240);
    loop {
        if answering {
            answer(http, &s.base, token).await;
        }
        let base = get(http, &s.base, token, &format!("/api/state/{base_task}")).await;
        if let (Some(ts), Some(base)) = (tasks(http, &s.base, token).await, base) {
            // A list of tasks gives its pools' sizes; the base task in full gives its goals.
            let goals = base["state"]["shared_conversation_pool"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| {
                    e["message"]["message"]
                        .as_str()
                        .unwrap()
                        .starts_with("GOAL#")
                })
                .count();
            let others: Vec<&Value> = ts
                .iter()
                .filter(|(k, _)| *k != base_task)
                .map(|(_, t)| t)
                .collect();
            if goals >= at_least
                && others.len() == goals
                && others.iter().all(|t| t["execution_state"] == "finished")
            {
                return goals;
            }
            assert!(
                Instant::now() < deadline,
                "the team did not finish: {goals} goals, tasks {:?}\n{}",
                others
                    .iter()
                    .map(|t| t["execution_state"].clone())
                    .collect::<Vec<_>>(),
                s.log()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Per task: finished steps per (agent, executor) and messages per (sender → receivers).
type Signature = BTreeMap<String, usize>;

/// An agent as a signature names it: each task's hired helper (`helper-<task id>`) is "helper".
fn who(id: &Value) -> String {
    let id = id.as_str().unwrap();
    if id.starts_with("helper-") {
        "helper".into()
    } else {
        id.to_owned()
    }
}

struct Record {
    by_task: BTreeMap<String, Signature>,
    /// Every goal number in the base task's conversation, as often as it is there.
    goals: Vec<usize>,
}

/// `cohort export` of `data`: every stored event, as JSON (the recorded model calls after
/// them are not events).
fn exported(data: &Data) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("export")
        .args(data.args())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|l| l.get("model_call").is_none())
        .collect()
}

fn export(data: &Data) -> Record {
    let mut steps: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut by_task: BTreeMap<String, Signature> = BTreeMap::new();
    let mut goals = Vec::new();
    for e in exported(data) {
        match (e["kind"].as_str().unwrap(), e["op"].as_str().unwrap()) {
            ("step", "added") => {
                let s = &e["step"];
                steps.insert(
                    s["step_id"].as_str().unwrap().to_owned(),
                    (
                        s["task_id"].as_str().unwrap().to_owned(),
                        format!("step {} {}", who(&s["agent_id"]), s["executor"]),
                    ),
                );
            }
            ("step", "updated") if e["execution_state"] == "finished" => {
                let (task, key) = &steps[e["step_id"].as_str().unwrap()];
                *by_task
                    .entry(task.clone())
                    .or_default()
                    .entry(key.clone())
                    .or_default() += 1;
            }
            ("task", "conversation") => {
                let m = &e["entry"]["message"];
                let text = m["message"].as_str().unwrap();
                if let Some(k) = text.strip_prefix("GOAL#") {
                    goals.push(k.split(' ').next().unwrap().parse().unwrap());
                }
                let to: Vec<String> = m["receiver"].as_array().unwrap().iter().map(who).collect();
                let key = format!("message {} -> {to:?}", who(&m["sender_id"]));
                *by_task
                    .entry(e["task_id"].as_str().unwrap().to_owned())
                    .or_default()
                    .entry(key)
                    .or_default() += 1;
            }
            _ => {}
        }
    }
    Record { by_task, goals }
}

/// The run's random source, from `COHORT_CRASH_SEED` or the clock (printed either way).
fn seeded(name: &str, kills: usize) -> Rng {
    let seed = std::env::var("COHORT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("{name}: {kills} kills, COHORT_CRASH_SEED={seed}");
    Rng(seed)
}

async fn crash_run(name: &str, data: Data, dir: &Path, kills: usize, how: End) {
    let mut rng = seeded(name, kills);
    let http = http();

    // A goal that runs with no kill: what every task must look like in the end.
    let mut s = Server::start(&data, dir.join(format!("{name}-0.log")));
    let token = wait_up(&http, &mut s, None).await;
    let all = tasks(&http, &s.base, &token).await.unwrap();
    assert_eq!(all.len(), 1, "a fresh store has the base task only");
    let base_task = all.keys().next().unwrap().clone();
    let driver = Arc::new(Driver {
        next_goal: AtomicUsize::new(0),
        acked: Mutex::new(BTreeSet::new()),
        goals_up_to: AtomicUsize::new(1),
    });
    let (stop, running) = start_driver(&driver, &s, &token, &base_task);
    assert_eq!(settle(&http, &s, &token, &base_task, 1, false).await, 1);
    stop.store(true, Ordering::Relaxed);
    running.await.unwrap();

    // Then goals keep coming while the process is killed at random moments.
    for round in 1..=kills {
        driver
            .goals_up_to
            .fetch_add(1 + rng.below(3) as usize, Ordering::SeqCst);
        let (stop, running) = start_driver(&driver, &s, &token, &base_task);
        tokio::time::sleep(Duration::from_millis(50 + rng.below(600))).await;
        // What the API shows now was stored before it was shown: it must survive the kill.
        let shown = tasks(&http, &s.base, &token).await;
        tokio::time::sleep(Duration::from_millis(rng.below(40))).await;
        s.end(how);
        stop.store(true, Ordering::Relaxed);
        running.await.unwrap();
        s = Server::start(&data, dir.join(format!("{name}-{round}.log")));
        wait_up(&http, &mut s, Some(&token)).await;
        let now = tasks(&http, &s.base, &token).await.unwrap();
        for (id, before) in shown.into_iter().flatten() {
            let after = match now.get(&id) {
                Some(t) => t.clone(),
                None => get(&http, &s.base, &token, &format!("/api/state/{id}"))
                    .await
                    .unwrap_or_else(|| panic!("round {round}: task {id} is gone\n{}", s.log())),
            };
            if before["execution_state"] == "finished" {
                assert_eq!(
                    after["execution_state"], "finished",
                    "round {round}: task {id}"
                );
            }
        }
    }

    // The last run finishes everything; nothing new is sent.
    let acked = driver.acked.lock().unwrap().len();
    let goals = settle(&http, &s, &token, &base_task, acked, true).await;
    s.stop();

    check_record(&data, &driver, &base_task, goals, kills);
    println!(
        "{name}: {kills} kills, {goals} goals ({acked} acknowledged), every task as without a kill"
    );
}

/// The store's record after `goals` goals and `kills` kills: every acknowledged goal taken
/// exactly once, and every task with the same finished steps and messages as the first one,
/// which ran without a kill.
fn check_record(data: &Data, driver: &Driver, base_task: &str, goals: usize, kills: usize) {
    let record = export(data);
    let acked = driver.acked.lock().unwrap().clone();
    let taken: BTreeSet<usize> = record.goals.iter().copied().collect();
    assert_eq!(
        taken.len(),
        record.goals.len(),
        "a goal was taken twice: {:?}",
        record.goals
    );
    assert_eq!(taken.len(), goals);
    assert!(
        acked.is_subset(&taken),
        "acknowledged goals were lost: {:?}",
        acked.difference(&taken).collect::<Vec<_>>()
    );
    assert!(goals > kills, "too few goals ran ({goals}) to say much");
    let reference = record
        .by_task
        .iter()
        .find(|(t, _)| **t != base_task)
        .map(|(_, s)| s.clone())
        .unwrap();
    assert!(reference.len() >= 10, "{reference:?}");
    let mut tasks_seen = 0;
    for (task, sig) in &record.by_task {
        if *task == *base_task {
            continue;
        }
        tasks_seen += 1;
        assert_eq!(
            sig, &reference,
            "task {task} ran differently from a task without a kill (a step or message lost or done twice)"
        );
    }
    assert_eq!(tasks_seen, goals);
    // The base task: each goal was read, decided on and turned into a task exactly once.
    let base = &record.by_task[base_task];
    for (key, n) in base {
        assert_eq!(
            *n, goals,
            "base task: {key} happened {n} times for {goals} goals"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_nothing_and_does_nothing_twice_sqlite() {
    let kills = std::env::var("COHORT_CRASH_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(20);
    let dir = Scratch::new("crash-sqlite");
    crash_run(
        "sqlite",
        Data::Sqlite(dir.join("team.db")),
        &dir,
        kills,
        End::Kill,
    )
    .await;
}

/// SIGTERM while goals run stops the actors before the journal: every stop is clean (no change
/// made after the journal closed), and the restarted team loses and repeats nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_while_goals_run_stores_every_change_and_loses_nothing() {
    let dir = Scratch::new("sigterm-sqlite");
    let data = Data::Sqlite(dir.join("team.db"));
    crash_run("sigterm", data, &dir, 6, End::Term).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_loses_nothing_and_does_nothing_twice_postgres() {
    let pg = postgres::Cluster::start("crash");
    let dir = Scratch::new("crash-postgres");
    crash_run("postgres", Data::Postgres(pg.url()), &dir, 8, End::Kill).await;
}

/// The team's event stream on `nats` holds every event of the store, each once and in order,
/// as the store keeps it, though the nodes that published them were killed again and again;
/// returns how many.
async fn check_stream(data: &Data, nats: &nats::Nats) -> usize {
    let stored = exported(data);
    let (_, published) = nats.stream_events("COHORT_crash_EVENTS").await;
    assert_eq!(
        published.len(),
        stored.len(),
        "the stream and the store hold as many events"
    );
    for ((version, got), want) in published.iter().zip(&stored) {
        assert_eq!(got, want, "event {version} of the stream");
    }
    stored.len()
}

/// The node of `nodes` that runs the team (every node serves the API, a standing-by one by
/// passing requests on to it: the `cohort-node` header of an answer names the node that made
/// it); logs in on it first when no `token` is given yet. Waits up to a minute.
async fn leader(http: &reqwest::Client, nodes: &[Server], token: Option<&str>) -> (usize, String) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for (i, n) in nodes.iter().enumerate() {
            let Ok(r) = http.get(format!("{}/api/states", n.base)).send().await else {
                continue;
            };
            let made_by = r.headers().get("cohort-node").and_then(|v| v.to_str().ok());
            if made_by != n.node.as_deref() {
                continue;
            }
            match token {
                Some(t) => return (i, t.to_owned()),
                None => {
                    let login = http
                        .post(format!("{}/api/bind_human_agent", n.base))
                        .json(&json!({"human_agent_id": "operator", "password": "cohort-demo"}))
                        .send()
                        .await;
                    if let Ok(r) = login
                        && r.status().is_success()
                    {
                        let v: Value = r.json().await.unwrap();
                        return (i, v["token"].as_str().unwrap().to_owned());
                    }
                }
            }
        }
        let logs: Vec<String> = nodes.iter().map(Server::log).collect();
        assert!(
            Instant::now() < deadline,
            "no node runs the team:\n{}",
            logs.join("\n---\n")
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Three nodes of one team on one Postgres store, a node killed with kill -9 again and again
/// (the node running the team three times in four, else one standing by) and started again
/// under its name while goals come: a standing-by node takes over each time, and in the end
/// the store's record is as if nothing had been killed.
async fn cluster_run(url: String, nats: &nats::Nats, dir: &Path, kills: usize) {
    const NAMES: [&str; 3] = ["n1", "n2", "n3"];
    const LEASE_SECS: u64 = 2;
    let mut rng = seeded("nodes", kills);
    let http = http();
    let data = Data::Postgres(url);
    let start = |i: usize, round: usize| {
        let log = dir.join(format!("{}-{round}.log", NAMES[i]));
        Server::start_node(&data, log, NAMES[i], LEASE_SECS, &nats.url())
    };
    let mut nodes: Vec<Server> = (0..NAMES.len()).map(|i| start(i, 0)).collect();
    let (mut l, token) = leader(&http, &nodes, None).await;
    let all = tasks(&http, &nodes[l].base, &token).await.unwrap();
    let base_task = all.keys().next().unwrap().clone();
    let driver = Arc::new(Driver {
        next_goal: AtomicUsize::new(0),
        acked: Mutex::new(BTreeSet::new()),
        goals_up_to: AtomicUsize::new(1),
    });
    let (stop, running) = start_driver(&driver, &nodes[l], &token, &base_task);
    assert_eq!(
        settle(&http, &nodes[l], &token, &base_task, 1, false).await,
        1
    );
    stop.store(true, Ordering::Relaxed);
    running.await.unwrap();

    let mut takeovers = Vec::new();
    for round in 1..=kills {
        driver
            .goals_up_to
            .fetch_add(1 + rng.below(3) as usize, Ordering::SeqCst);
        let (stop, running) = start_driver(&driver, &nodes[l], &token, &base_task);
        tokio::time::sleep(Duration::from_millis(50 + rng.below(600))).await;
        let shown = tasks(&http, &nodes[l].base, &token).await;
        let led = l;
        let victim = if rng.below(4) < 3 {
            l
        } else {
            (l + 1 + rng.below(2) as usize) % 3
        };
        let killed = Instant::now();
        let restarted = start(victim, round);
        std::mem::replace(&mut nodes[victim], restarted).kill();
        stop.store(true, Ordering::Relaxed);
        running.await.unwrap();
        (l, _) = leader(&http, &nodes, Some(&token)).await;
        if victim == led {
            takeovers.push(killed.elapsed());
            println!(
                "round {round}: {} killed, {} runs the team after {:?}",
                NAMES[led],
                NAMES[l],
                killed.elapsed()
            );
        }
        let now = tasks(&http, &nodes[l].base, &token).await.unwrap();
        for (id, before) in shown.into_iter().flatten() {
            let after = match now.get(&id) {
                Some(t) => t.clone(),
                None => get(&http, &nodes[l].base, &token, &format!("/api/state/{id}"))
                    .await
                    .unwrap_or_else(|| panic!("round {round}: task {id} is gone")),
            };
            if before["execution_state"] == "finished" {
                assert_eq!(
                    after["execution_state"], "finished",
                    "round {round}: task {id}"
                );
            }
        }
    }
    let acked = driver.acked.lock().unwrap().len();
    let goals = settle(&http, &nodes[l], &token, &base_task, acked, true).await;
    // Standing-by nodes first, so none takes over while the last one stops.
    let leading = nodes.remove(l);
    nodes.into_iter().for_each(Server::stop);
    leading.stop();
    check_record(&data, &driver, &base_task, goals, kills);
    let published = check_stream(&data, nats).await;
    takeovers.sort();
    println!(
        "nodes: {kills} kills, {goals} goals ({acked} acknowledged), every task as without a kill, \
         {published} events on the stream as in the store; the team ran again {:?} (median) to \
         {:?} (most) after a kill (lease {LEASE_SECS} s)",
        takeovers.get(takeovers.len() / 2),
        takeovers.last()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_of_nodes_of_a_team_across_machines_loses_nothing_and_does_nothing_twice() {
    let pg = postgres::Cluster::start("crash-nodes");
    let nats = nats::Nats::start("crash-nodes");
    let dir = Scratch::new("crash-nodes");
    let kills = std::env::var("COHORT_CRASH_NODE_KILLS")
        .ok()
        .and_then(|k| k.parse().ok())
        .unwrap_or(20);
    cluster_run(pg.url(), &nats, &dir, kills).await;
}
