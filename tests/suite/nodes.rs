//! A team across machines on one Postgres store (`cohort serve --node NAME`): the team's lease
//! and its fencing token, checked where it matters, in the store's own transactions, and the
//! nodes as a person runs them: one runs the team, the others stand by and say where it is; a
//! node killed with kill -9 is replaced once its lease runs out, one stopped with SIGTERM at
//! once; a node with another team file is refused.

use crate::support::nats;
use crate::support::postgres;
use crate::support::scratch;

use cohort::config::MemoryBudget;
use cohort::event::{Change, Event, StatesRecord, TaskChange};
use cohort::node::bus::{Bus, BusOptions, Credentials, Tls};
use cohort::node::follower::Follower;
use cohort::node::relay;
use cohort::state::TaskState;
use cohort::store::lease::{AgentWrite, Fence, Seat, TEAM_LEASE, Taken};
use cohort::store::{SnapshotJson, SqlStore, Store, StoreError, StoredEvent};
use scratch::Scratch;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn task_created(version: u64, task: &str) -> StoredEvent {
    let t = TaskState::new(task.into(), format!("task {task}"), "i".into(), "m".into());
    StoredEvent {
        event: Event {
            version,
            at: 1_700_000_000_000 + version as i64,
            change: Change::Task(TaskChange::Created { task: Box::new(t) }),
        },
        task_id: Some(task.into()),
    }
}

fn seat(node: &str) -> Seat {
    Seat {
        node: node.into(),
        instance: format!("{node}-instance"),
        address: format!("{node}:7878"),
        team_hash: "same".into(),
    }
}

async fn take(store: &SqlStore, node: &str, ttl: Duration) -> Taken {
    store
        .take_lease(TEAM_LEASE, &seat(node), ttl)
        .await
        .unwrap()
}

fn held(t: Taken) -> Fence {
    match t {
        Taken::Held(f) => f,
        other => panic!("the lease was not taken: {other:?}"),
    }
}

#[tokio::test]
async fn a_node_that_lost_the_lease_cannot_append_or_snapshot_and_its_successor_can() {
    let pg = postgres::Cluster::start("fence");
    let a = SqlStore::open_postgres_node(&pg.url()).await.unwrap();
    let b = SqlStore::open_postgres_node(&pg.url()).await.unwrap();
    for n in ["a", "b"] {
        a.join(&seat(n), Duration::from_secs(10)).await.unwrap();
    }
    let ttl = Duration::from_millis(1500);
    let fa = held(take(&a, "a", ttl).await);
    assert_eq!(fa.token, 1);
    // While a holds it, b is told who does and where.
    match take(&b, "b", ttl).await {
        Taken::HeldBy { node, address, .. } => {
            assert_eq!((node.as_str(), address.as_str()), ("a", "a:7878"))
        }
        other => panic!("{other:?}"),
    }
    let a_writes = a.fenced(fa.clone()).await.unwrap();
    a_writes.append(&[task_created(1, "t1")]).await.unwrap();
    assert!(a.renew_lease(&fa, ttl).await.unwrap());

    // a stops renewing (cut off, or dead): once the term is up, b takes the lease over.
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    let fb = held(take(&b, "b", ttl).await);
    assert_eq!(fb.token, 2, "a takeover gets the next token");
    let b_writes = b.fenced(fb.clone()).await.unwrap();

    // Whatever a still tries to write is refused by the store, in the write's transaction.
    let refused = a_writes.append(&[task_created(2, "t2")]).await.unwrap_err();
    assert!(
        matches!(&refused, StoreError::Fenced { token: 1, token_now: 2, held_by, .. } if held_by == "b"),
        "{refused}"
    );
    let snap =
        SnapshotJson::from(serde_json::to_string(&StatesRecord::of(&Default::default())).unwrap());
    assert!(matches!(
        a_writes.put_snapshot(1, snap).await,
        Err(StoreError::Fenced { .. })
    ));
    assert!(
        !a.renew_lease(&fa, ttl).await.unwrap(),
        "a cannot renew what b holds"
    );

    // b carries on from what a stored, and writes.
    assert_eq!(b_writes.last_version().await.unwrap(), 1);
    b_writes.append(&[task_created(2, "t2")]).await.unwrap();
    let events = b.events_after(0, 10).await.unwrap();
    assert_eq!(events.iter().map(|e| e.version).collect::<Vec<_>>(), [1, 2]);

    // Given up, the lease is taken at once, with the next token again.
    b.release_lease(&fb).await.unwrap();
    assert_eq!(held(take(&a, "a", ttl).await).token, 3);
    let (nodes, leases) = a.placement().await.unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!((leases[0].node.as_str(), leases[0].token), ("a", 3));
}

/// An agent's changes from another node are committed only while the token they were made
/// under is still the agent's lease's: once the team's node granted the agent to a third
/// node, the store refuses a write under the old token, in the write's own transaction (the
/// team's node's memory is not the only fence), and takes one under the new token.
#[tokio::test]
async fn an_agents_write_under_a_token_it_was_granted_away_from_is_refused_by_the_store() {
    let pg = postgres::Cluster::start("agent-fence");
    let store = SqlStore::open_postgres_node(&pg.url()).await.unwrap();
    for n in ["a", "b", "c"] {
        store.join(&seat(n), Duration::from_secs(10)).await.unwrap();
    }
    let ttl = Duration::from_secs(10);
    let team = held(take(&store, "a", ttl).await);
    let writes = store.fenced(team.clone()).await.unwrap();
    let on = |n: &str| (n.to_owned(), seat(n).instance);
    let (b, c) = (on("b"), on("c"));
    let first = store
        .grant_agent_lease(&team, "writer", (&b.0, &b.1), ttl)
        .await
        .unwrap();
    let as_of = |token| {
        [AgentWrite {
            agent: "writer".into(),
            token,
        }]
    };
    writes
        .append_as(&[task_created(1, "t1")], &as_of(first))
        .await
        .unwrap();

    let second = store
        .grant_agent_lease(&team, "writer", (&c.0, &c.1), ttl)
        .await
        .unwrap();
    assert_eq!(
        second,
        first + 1,
        "a grant to another node gets the next token"
    );
    let refused = writes
        .append_as(&[task_created(2, "t2")], &as_of(first))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::Fenced { resource, token_now, held_by, .. }
            if resource == "agent/writer" && *token_now == second && held_by == "c"),
        "{refused}"
    );
    assert_eq!(
        writes.last_version().await.unwrap(),
        1,
        "nothing of it was stored"
    );
    // An agent never granted is no fence to pass either.
    let never = [AgentWrite {
        agent: "nobody".into(),
        token: 1,
    }];
    assert!(matches!(
        writes.append_as(&[task_created(2, "t2")], &never).await,
        Err(StoreError::Fenced { .. })
    ));
    writes
        .append_as(&[task_created(2, "t2")], &as_of(second))
        .await
        .unwrap();
    let events = store.events_after(0, 10).await.unwrap();
    assert_eq!(events.iter().map(|e| e.version).collect::<Vec<_>>(), [1, 2]);
}

/// A write under way (it holds the lease row as a fenced append does) holds up a takeover until
/// it commits, but not the holder's renewal: a long snapshot never costs its node the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_under_way_holds_up_a_takeover_but_not_a_renewal() {
    use sqlx::Connection;
    let pg = postgres::Cluster::start("fence-locks");
    let a = std::sync::Arc::new(SqlStore::open_postgres_node(&pg.url()).await.unwrap());
    let b = std::sync::Arc::new(SqlStore::open_postgres_node(&pg.url()).await.unwrap());
    let ttl = Duration::from_millis(1500);
    let fa = held(take(&a, "a", ttl).await);
    sqlx::any::install_default_drivers();
    let mut conn = sqlx::AnyConnection::connect(&pg.url()).await.unwrap();
    let mut write = conn.begin().await.unwrap();
    sqlx::query("SELECT token FROM leases WHERE resource = 'team' FOR KEY SHARE")
        .fetch_one(&mut *write)
        .await
        .unwrap();
    let renewed = tokio::time::timeout(Duration::from_secs(2), a.renew_lease(&fa, ttl)).await;
    assert!(
        matches!(renewed, Ok(Ok(true))),
        "the renewal waited for the write: {renewed:?}"
    );
    tokio::time::sleep(ttl + Duration::from_millis(200)).await;
    let taking = {
        let b = b.clone();
        tokio::spawn(async move { b.take_lease(TEAM_LEASE, &seat("b"), ttl).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !taking.is_finished(),
        "the takeover did not wait for the write under way"
    );
    write.commit().await.unwrap();
    let taken = taking.await.unwrap().unwrap();
    assert_eq!(held(taken).token, 2);
}

#[tokio::test]
async fn nodes_share_the_store_and_keep_a_lone_serve_out() {
    let pg = postgres::Cluster::start("node-lock");
    let a = SqlStore::open_postgres_node(&pg.url()).await.unwrap();
    let _b = SqlStore::open_postgres_node(&pg.url()).await.unwrap();
    let lone = SqlStore::open_postgres(&pg.url()).await.err().unwrap();
    assert!(matches!(lone, StoreError::Locked { .. }), "{lone}");
    drop((a, _b));
    // A lone serve's store keeps nodes out the same way.
    let _lone = SqlStore::open_postgres(&pg.url()).await.unwrap();
    let node = SqlStore::open_postgres_node(&pg.url()).await.err().unwrap();
    assert!(matches!(node, StoreError::Locked { .. }), "{node}");
}

/// Nodes started together on a new database migrate it one at a time: none fails on the
/// tables another is making.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_starting_together_on_a_new_database_all_open_it() {
    let pg = postgres::Cluster::start("node-migrate");
    let url = pg.url();
    let (a, b, c) = tokio::join!(
        SqlStore::open_postgres_node(&url),
        SqlStore::open_postgres_node(&url),
        SqlStore::open_postgres_node(&url)
    );
    for opened in [a, b, c] {
        opened.unwrap();
    }
}

/// Two nodes with different team files that start at the same moment: never both let in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_nodes_with_different_team_files_starting_together_one_is_refused() {
    let pg = postgres::Cluster::start("node-team-race");
    let (a, b) = (
        SqlStore::open_postgres_node(&pg.url()).await.unwrap(),
        SqlStore::open_postgres_node(&pg.url()).await.unwrap(),
    );
    for round in 0..20 {
        let x = seat(&format!("x{round}"));
        let y = Seat {
            team_hash: "edited".into(),
            ..seat(&format!("y{round}"))
        };
        let live = Duration::from_secs(10);
        let (joined_x, joined_y) = tokio::join!(a.join(&x, live), b.join(&y, live));
        assert!(
            joined_x.is_err() || joined_y.is_err(),
            "round {round}: both let in"
        );
        let refused = joined_x.err().or(joined_y.err()).unwrap();
        assert!(
            matches!(refused, StoreError::TeamDiffers { .. }),
            "{refused}"
        );
        // Both gone before the next round.
        a.leave(&x).await.unwrap();
        a.leave(&y).await.unwrap();
    }
}

#[tokio::test]
async fn a_node_with_another_team_file_is_refused_while_the_others_run() {
    let pg = postgres::Cluster::start("node-team");
    let store = SqlStore::open_postgres_node(&pg.url()).await.unwrap();
    store
        .join(&seat("a"), Duration::from_secs(10))
        .await
        .unwrap();
    let other = Seat {
        team_hash: "edited".into(),
        ..seat("b")
    };
    let refused = store
        .join(&other, Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::TeamDiffers { node, other } if node == "b" && other == "a"),
        "{refused}"
    );
    // Once the others have stopped, the edited file is the team's (as a restart follows it).
    store.leave(&seat("a")).await.unwrap();
    store.join(&other, Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn a_sqlite_store_cannot_hold_nodes() {
    let dir = Scratch::new("node-sqlite");
    let store = SqlStore::open_sqlite(&dir.join("team.db")).await.unwrap();
    let refused = store
        .join(&seat("a"), Duration::from_secs(10))
        .await
        .unwrap_err();
    assert!(
        matches!(refused, StoreError::NodesNeedPostgres { .. }),
        "{refused}"
    );
}

/// A `cohort serve --node` process.
struct Node {
    child: Child,
    base: String,
    log: std::path::PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    fn start(name: &str, team: &str, url: &str, lease_secs: u64, dir: &std::path::Path) -> Node {
        Self::start_with(name, team, url, lease_secs, dir, &[], &[])
    }

    fn start_with(
        name: &str,
        team: &str,
        url: &str,
        lease_secs: u64,
        dir: &std::path::Path,
        more: &[&str],
        env: &[(&str, &str)],
    ) -> Node {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let log = dir.join(format!("{name}-{port}.log"));
        let child = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(["serve", "--team", team, "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .args(["--database", url, "--node", name, "--lease-secs"])
            .arg(lease_secs.to_string())
            .args(more)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Node {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What the node answers to a login as the operator: its status and body (None while it
    /// does not answer yet).
    async fn login(&self, http: &reqwest::Client) -> Option<(u16, Value)> {
        let r = http
            .post(format!("{}/api/bind_human_agent", self.base))
            .json(&json!({"human_agent_id": "operator", "password": "cohort-demo"}))
            .send()
            .await
            .ok()?;
        Some((r.status().as_u16(), r.json().await.unwrap_or(Value::Null)))
    }

    /// Asks `ask` every 50 ms until it answers, for at most `within` (then fails, saying it
    /// was waiting for `what`, with the node's log).
    async fn poll<T>(
        &self,
        what: &str,
        within: Duration,
        mut ask: impl AsyncFnMut() -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + within;
        loop {
            if let Some(answer) = ask().await {
                return answer;
            }
            assert!(
                Instant::now() < deadline,
                "{}: {what} not within {within:?}:\n{}",
                self.base,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the node answers a login with `status`; its body.
    async fn until(&self, http: &reqwest::Client, status: u16, within: Duration) -> Value {
        let what = format!("a login answered {status}");
        self.poll(&what, within, async || {
            self.login(http)
                .await
                .filter(|(s, _)| *s == status)
                .map(|(_, body)| body)
        })
        .await
    }

    /// The operator's token from a login on this node, once it answers one (within `within`).
    async fn token(&self, http: &reqwest::Client, within: Duration) -> String {
        let body = self.until(http, 200, within).await;
        body["token"].as_str().unwrap().to_owned()
    }

    /// The node that made this node's answer to a read (the one running the team: a node
    /// standing by passes requests on to it), when it answers.
    async fn served_by(&self, http: &reqwest::Client) -> Option<String> {
        let r = http
            .get(format!("{}/api/states", self.base))
            .send()
            .await
            .ok()?;
        Some(r.headers().get("cohort-node")?.to_str().ok()?.to_owned())
    }

    /// Waits until this node's answers are made by node `name`.
    async fn until_served_by(&self, http: &reqwest::Client, name: &str, within: Duration) {
        let what = format!("served by node {name}");
        self.poll(&what, within, async || {
            (self.served_by(http).await.as_deref() == Some(name)).then_some(())
        })
        .await
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.id().to_string();
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    }

    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + within;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "the node did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

const TEAM: &str = "tests/fixtures/crash/team.yaml";

/// A standing-by node serves the API by passing every request on to the node running the
/// team, and runs the team itself at once when that node stops on SIGTERM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_by_node_serves_through_the_leader_and_takes_over_at_once_on_sigterm() {
    let pg = postgres::Cluster::start("node-handover");
    let dir = Scratch::new("node-handover");
    let http = reqwest::Client::new();
    // A lease of a minute: only a lease given up makes the second node take over sooner.
    let mut a = Node::start("a", TEAM, &pg.url(), 60, &dir);
    let token = a.token(&http, Duration::from_secs(60)).await;
    let b = Node::start("b", TEAM, &pg.url(), 60, &dir);
    b.until_served_by(&http, "a", Duration::from_secs(60)).await;
    // Through b: a login, a read, a goal, and the websocket feed, all made by a.
    let via_b = b.token(&http, Duration::from_secs(10)).await;
    let r = http
        .get(format!("{}/api/states?type=task", b.base))
        .bearer_auth(&via_b)
        .send()
        .await
        .unwrap();
    assert_eq!(r.headers()["cohort-node"], "a");
    assert_eq!(r.headers()["cohort-via"], "b");
    assert!(r.status().is_success(), "{}", r.status());
    let ws = format!("ws{}/ws?token={via_b}", b.base.trim_start_matches("http"));
    let (mut feed, _) = tokio_tungstenite::connect_async(ws).await.unwrap();
    run_goal(&http, &b.base, &via_b, 1).await;
    let frame = tokio::time::timeout(Duration::from_secs(10), futures::StreamExt::next(&mut feed))
        .await
        .expect("a frame of the feed through b")
        .unwrap()
        .unwrap();
    assert!(frame.is_text(), "{frame:?}");
    drop(feed);

    let stopped = Instant::now();
    a.signal("-TERM");
    assert!(
        a.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        a.log()
    );
    b.until_served_by(&http, "b", Duration::from_secs(30)).await;
    let took = stopped.elapsed();
    println!("node b took over {took:?} after node a's SIGTERM");
    assert!(
        took < Duration::from_secs(30),
        "b waited for the lease to expire instead of taking the one a gave up"
    );
    // A person logged in on a is logged in on b: the sessions are in the store.
    let r = http
        .get(format!("{}/api/states?type=task", b.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert!(!a.log().contains("was not stored"), "{}", a.log());
}

/// A node killed and started again at once under its name finds the lease held by its
/// previous run: it answers at once that it stands by (never passing requests on to itself),
/// and runs the team once that lease has run out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_under_its_name_waits_out_its_previous_runs_lease() {
    let pg = postgres::Cluster::start("node-restart");
    let dir = Scratch::new("node-restart");
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut a = Node::start("a", TEAM, &pg.url(), 8, &dir);
    a.until_served_by(&http, "a", Duration::from_secs(60)).await;
    a.signal("-KILL");
    a.wait_exit(Duration::from_secs(10));
    let again = Node::start("a", TEAM, &pg.url(), 8, &dir);
    // (Its first answers may come before it has looked at the lease at all.)
    again
        .poll(
            "a stand-by answer naming its previous run",
            Duration::from_secs(10),
            async || {
                let (status, body) = again.login(&http).await?;
                let told = body["error"]
                    .as_str()
                    .unwrap_or_default()
                    .contains("previous run");
                (status == 503 && told).then_some(())
            },
        )
        .await;
    again
        .until_served_by(&http, "a", Duration::from_secs(30))
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_team_file_differs_from_the_running_nodes_is_refused() {
    let pg = postgres::Cluster::start("node-differs");
    let dir = Scratch::new("node-differs");
    let http = reqwest::Client::new();
    let a = Node::start("a", TEAM, &pg.url(), 10, &dir);
    a.until(&http, 200, Duration::from_secs(60)).await;
    // The same team with one more line: another file.
    let edited = dir.join("team.yaml");
    let text = std::fs::read_to_string(TEAM).unwrap() + "\n# edited\n";
    std::fs::write(
        &edited,
        text.replace(
            "script: script.yaml",
            &format!(
                "script: {}/tests/fixtures/crash/script.yaml",
                env!("CARGO_MANIFEST_DIR")
            ),
        ),
    )
    .unwrap();
    let mut b = Node::start("b", edited.to_str().unwrap(), &pg.url(), 10, &dir);
    let status = b.wait_exit(Duration::from_secs(60));
    assert_eq!(status.code(), Some(3), "{}", b.log());
    assert!(
        b.log().contains("runs another team file than node `a`"),
        "{}",
        b.log()
    );
}

/// A TCP proxy on loopback to `to`, that can cut every connection and refuse new ones (a node
/// cut off from its store) and let them through again.
struct Proxy {
    port: u16,
    open: tokio::sync::watch::Sender<bool>,
}

impl Proxy {
    async fn start(to: u16) -> Proxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let (open, is_open) = tokio::sync::watch::channel(true);
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    return;
                };
                if !*is_open.borrow() {
                    continue;
                }
                let mut cut = is_open.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await
                    else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.wait_for(|open| !*open) => {}
                    }
                });
            }
        });
        Proxy { port, open }
    }

    fn cut(&self) {
        self.open.send_replace(false);
    }

    fn restore(&self) {
        self.open.send_replace(true);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_the_store_stops_and_rejoins_without_writing_stale_state() {
    let pg = postgres::Cluster::start("node-cut");
    let dir = Scratch::new("node-cut");
    let http = reqwest::Client::new();
    let proxy = Proxy::start(pg.port()).await;
    let through_proxy = pg
        .url()
        .replace(&format!(":{}/", pg.port()), &format!(":{}/", proxy.port));
    let a = Node::start("a", TEAM, &through_proxy, 3, &dir);
    let token = a.token(&http, Duration::from_secs(60)).await;
    let b = Node::start("b", TEAM, &pg.url(), 3, &dir);
    b.until_served_by(&http, "a", Duration::from_secs(60)).await;

    // a's connections to the store drop: it stops serving the team within its lease, and b,
    // which still reaches the store, runs it.
    let cut = Instant::now();
    proxy.cut();
    b.until_served_by(&http, "b", Duration::from_secs(30)).await;
    println!(
        "b ran the team {:?} after a was cut off (lease 3 s)",
        cut.elapsed()
    );
    // a no longer answers as the team's node.
    let deadline = Instant::now() + Duration::from_secs(30);
    while a.served_by(&http).await.as_deref() == Some("a") {
        assert!(Instant::now() < deadline, "a still acts:\n{}", a.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        a.log().contains("this node stops acting for the team"),
        "{}",
        a.log()
    );

    // Given work on b, the team goes on there; a comes back and stands by, writing nothing.
    let base_task = {
        let r = http
            .get(format!("{}/api/states?type=task", b.base))
            .bearer_auth(&token)
            .send()
            .await
            .unwrap();
        let v: Value = r.json().await.unwrap();
        v.as_object().unwrap().keys().next().unwrap().clone()
    };
    let goal = http
        .post(format!("{}/api/send_message", b.base))
        .bearer_auth(&token)
        .json(&json!({"human_agent_id": "operator", "task_id": base_task, "receiver": ["manager"], "content": "GOAL#1 write one line", "need_reply": false}))
        .send()
        .await
        .unwrap();
    assert!(goal.status().is_success(), "{}", goal.status());
    proxy.restore();
    a.until_served_by(&http, "b", Duration::from_secs(30)).await;
    let store = SqlStore::open_reader(&pg.url()).await.unwrap();
    let (_, leases) = store.placement().await.unwrap();
    assert_eq!((leases[0].node.as_str(), leases[0].token), ("b", 2));
    // The store's versions run on without a gap or a second writer's repeat.
    let events = store.events_after(0, 100_000).await.unwrap();
    assert!(events.windows(2).all(|w| w[1].version == w[0].version + 1));
    assert!(!b.log().contains("refuses its writes"), "{}", b.log());
}

/// The tasks `base` shows, by id.
async fn tasks_on(
    http: &reqwest::Client,
    base: &str,
    token: &str,
) -> serde_json::Map<String, Value> {
    let tasks = get_json(http, format!("{base}/api/states?type=task"), token).await;
    tasks.as_object().unwrap().clone()
}

/// Sends goal `k` to the manager on `base`; whether it was acknowledged (so stored).
async fn send_goal(http: &reqwest::Client, base: &str, token: &str, k: usize) -> bool {
    let all = tasks_on(http, base, token).await;
    let base_task = all
        .iter()
        .find(|(_, t)| t["task_name"] == "MAS base task")
        .map(|(id, _)| id.clone())
        .unwrap_or_else(|| panic!("no base task in {all:?}"));
    let sent = http
        .post(format!("{base}/api/send_message"))
        .bearer_auth(token)
        .json(&json!({"human_agent_id": "operator", "task_id": base_task, "receiver": ["manager"], "content": format!("GOAL#{k} write one line"), "need_reply": false}))
        .send()
        .await
        .unwrap();
    sent.status().is_success()
}

/// Answers the manager's questions on `base` until it shows `tasks` tasks besides the base
/// task, every one of them finished. A node taking the team over or giving it up may drop a
/// connection: the round is made again (until the deadline, which says the last error).
async fn finish_tasks(http: &reqwest::Client, base: &str, token: &str, tasks: usize) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let seen = match finish_round(http, base, token, tasks).await {
            Ok((true, _)) => return,
            Ok((false, all)) => format!("{all:?}"),
            Err(e) => format!("the last request failed: {e}"),
        };
        assert!(
            Instant::now() < deadline,
            "{tasks} tasks did not finish: {seen}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One round of [`finish_tasks`]: the questions waiting answered, then whether the tasks are
/// all there and finished, with the tasks seen.
async fn finish_round(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    tasks: usize,
) -> Result<(bool, Value), reqwest::Error> {
    let pending: Value = http
        .get(format!("{base}/api/human/operator/pending"))
        .bearer_auth(token)
        .send()
        .await?
        .json()
        .await?;
    for q in pending["pending"].as_array().into_iter().flatten() {
        http.post(format!("{base}/api/send_message"))
            .bearer_auth(token)
            .json(&json!({"human_agent_id": "operator", "task_id": q["task_id"], "receiver": [q["sender_id"]], "content": "ANSWER# blue", "need_reply": false}))
            .send()
            .await?;
    }
    let all: Value = http
        .get(format!("{base}/api/states?type=task"))
        .bearer_auth(token)
        .send()
        .await?
        .json()
        .await?;
    let states = all.as_object().cloned().unwrap_or_default();
    let done = states
        .values()
        .filter(|t| t["task_name"] != "MAS base task" && t["execution_state"] == "finished")
        .count();
    Ok((states.len() == tasks + 1 && done == tasks, all))
}

/// Sends goal `k` (the `k`th) to the manager on `base` and sees its task to its end.
async fn run_goal(http: &reqwest::Client, base: &str, token: &str, k: usize) {
    assert!(
        send_goal(http, base, token, k).await,
        "goal {k} was refused"
    );
    finish_tasks(http, base, token, k).await;
}

/// Every `traceparent` header on the team's NATS from now on, as it arrives.
async fn traceparents_on_nats(nats: &nats::Nats) -> Arc<Mutex<Vec<String>>> {
    let client = async_nats::connect(nats.url()).await.unwrap();
    // Only the subjects that carry a message (calls to the team's node, inboxes): the whole
    // `cohort.>` brings the event stream's pages too, and a watcher run late on a loaded
    // machine fell behind them and saw no header at all.
    let core = client.subscribe("cohort.*.core").await.unwrap();
    let inboxes = client.subscribe("cohort.*.inbox.>").await.unwrap();
    let mut all = futures::stream::select(core, inboxes);
    client.flush().await.unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    tokio::spawn(async move {
        let _client = client;
        while let Some(m) = futures::StreamExt::next(&mut all).await {
            let tp = m.headers.as_ref().and_then(|h| h.get("traceparent"));
            if let Some(tp) = tp {
                into.lock().unwrap().push(tp.as_str().to_owned());
            }
        }
    });
    seen
}

/// The consumer of `agent`'s inbox in team `team`'s inbox stream, once it has acknowledged a
/// message (within 10 s).
async fn inbox_of(
    nats: &nats::Nats,
    team: &str,
    agent: &str,
) -> async_nats::jetstream::consumer::Info {
    let client = async_nats::connect(nats.url()).await.unwrap();
    let js = async_nats::jetstream::new(client);
    let stream = js.get_stream(format!("COHORT_{team}_INBOX")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = stream.consumer_info(format!("inbox-{agent}")).await;
        match info {
            Ok(info) if info.ack_floor.stream_sequence > 0 => return info,
            other => assert!(Instant::now() < deadline, "{other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A node with NATS publishes every change its store commits on the team's stream, once and
/// in order, across a restart of NATS itself (its streams are file-backed) and a node's
/// SIGTERM; its credentials never reach its log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_committed_change_reaches_the_teams_event_stream_once_and_in_order() {
    let pg = postgres::Cluster::start("node-events");
    let mut nats = nats::Nats::start_with_user("node-events", "cohort", "s3cret-pass");
    let dir = Scratch::new("node-events");
    let http = reqwest::Client::new();
    let url = nats.url();
    let more = ["--nats", url.as_str(), "--nats-user", "cohort"];
    let env = [("COHORT_NATS_PASSWORD", "s3cret-pass")];
    let mut a = Node::start_with("a", TEAM, &pg.url(), 10, &dir, &more, &env);
    let token = a.token(&http, Duration::from_secs(60)).await;
    run_goal(&http, &a.base, &token, 1).await;
    // NATS goes down and comes back: the relay waits, then publishes what it missed.
    nats.restart();
    run_goal(&http, &a.base, &token, 2).await;
    a.signal("-TERM");
    assert!(
        a.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        a.log()
    );

    let store = SqlStore::open_reader(&pg.url()).await.unwrap();
    let stored = store.events_after(0, 100_000).await.unwrap();
    let (messages, published) = nats.stream_events("COHORT_crash_EVENTS").await;
    assert_eq!(published.len(), stored.len(), "every stored change, once");
    assert!(
        messages < published.len() as u64 / 2,
        "changes committed together go out together: {messages} messages"
    );
    for ((v, json), e) in published.iter().zip(&stored) {
        assert_eq!(*v, e.version);
        assert_eq!(json, &serde_json::to_value(e).unwrap());
    }
    assert_eq!(
        store.published_to().await.unwrap(),
        Some(stored.last().unwrap().version)
    );
    assert!(
        !a.log().contains("s3cret-pass"),
        "the password was logged:\n{}",
        a.log()
    );

    // A team of the same name on another store, on the same NATS, publishes nothing into
    // this team's stream, and says why.
    let other_pg = postgres::Cluster::start("node-events-other");
    let good = [("COHORT_NATS_PASSWORD", "s3cret-pass")];
    let c = Node::start_with("c", TEAM, &other_pg.url(), 10, &dir, &more, &good);
    c.until(&http, 200, Duration::from_secs(60)).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.log().contains("holds the events of another store") {
        assert!(Instant::now() < deadline, "{}", c.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        nats.stream_events("COHORT_crash_EVENTS").await.1.len(),
        stored.len(),
        "another store's events went into this team's stream"
    );
    drop(c);

    // A node that may not log in to NATS says so and stops, before it serves anything.
    let wrong = [("COHORT_NATS_PASSWORD", "wrong")];
    let mut b = Node::start_with("b", TEAM, &pg.url(), 10, &dir, &more, &wrong);
    assert_eq!(
        b.wait_exit(Duration::from_secs(30)).code(),
        Some(3),
        "{}",
        b.log()
    );
    assert!(b.log().contains("cannot connect to NATS"), "{}", b.log());
    assert!(!b.log().contains("wrong"), "{}", b.log());
}

/// Waits until `follower` holds the team at `version` (within 10 s).
async fn until_followed(follower: &Follower, version: u64) -> cohort::monitor::Monitor {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(m) = follower.monitor()
            && m.version() >= version
        {
            return m.clone();
        }
        assert!(
            Instant::now() < deadline,
            "the follower did not reach {version}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A node's follower starts from the store once a feed wants it, takes the changes published
/// on the team's stream (one the store does not have shows it read the stream), reads from
/// the store what the stream lacks (no relay published it, or a gap), and shows the glimpses
/// of answers being written that the team's node passes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_takes_the_stream_and_what_it_lacks_from_the_store() {
    let pg = postgres::Cluster::start("follower");
    let nats = nats::Nats::start("follower");
    let store = Arc::new(SqlStore::open_postgres_node(&pg.url()).await.unwrap());
    store
        .join(&seat("a"), Duration::from_secs(60))
        .await
        .unwrap();
    let fence = held(take(&store, "a", Duration::from_secs(60)).await);
    let writes = store.fenced(fence).await.unwrap();
    writes
        .append(&[task_created(1, "t1"), task_created(2, "t2")])
        .await
        .unwrap();
    let options = BusOptions {
        url: nats.url(),
        credentials: Credentials::None,
        tls: Tls::default(),
    };
    let bus = Arc::new(Bus::connect(&options, "crash", "f").await.unwrap());
    let follower = Follower::start(bus.clone(), store.clone(), MemoryBudget::mib(16));
    // Nobody wants the states yet: nothing is loaded.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(follower.monitor().is_none(), "followed unwanted");
    let _wanted = follower.want();
    let monitor = until_followed(&follower, 2).await;
    // In the store, published by nobody: read from the store once the stream is quiet.
    writes.append(&[task_created(3, "t3")]).await.unwrap();
    until_followed(&follower, 3).await;
    // On the stream only: it came from the stream.
    let stamp = store.store_id().await.unwrap();
    let publish = async |e: StoredEvent| {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert("Cohort-Version", e.event.version.to_string().as_str());
        headers.insert("Cohort-Store", stamp.as_str());
        let json = serde_json::to_vec(&e.event).unwrap();
        let subject = bus.names.events_subject.clone();
        let ack = bus
            .jetstream
            .publish_with_headers(subject, headers, json.into());
        ack.await.unwrap().await.unwrap();
    };
    publish(task_created(4, "t4")).await;
    until_followed(&follower, 4).await;
    assert!(monitor.read(|s| s.tasks.contains_key(&"t4".into())));
    // A gap in the stream is filled from the store.
    writes.append(&[task_created(5, "t5")]).await.unwrap();
    publish(task_created(6, "t6")).await;
    until_followed(&follower, 6).await;
    assert_eq!(monitor.read(|s| s.tasks.len()), 6);
    // Messages of several changes, a line each: one holding a change the follower has (6)
    // and new ones; one whose first change is missing from its lines (read from the store).
    let publish_lines = async |(first, last): (u64, u64), events: &[StoredEvent]| {
        let mut headers = async_nats::HeaderMap::new();
        headers.insert(relay::VERSION, last.to_string().as_str());
        headers.insert(relay::FIRST_VERSION, first.to_string().as_str());
        headers.insert("Cohort-Store", stamp.as_str());
        let lines: Vec<String> = events
            .iter()
            .map(|e| serde_json::to_string(&e.event).unwrap())
            .collect();
        let subject = bus.names.events_subject.clone();
        let ack = bus
            .jetstream
            .publish_with_headers(subject, headers, lines.join("\n").into());
        ack.await.unwrap().await.unwrap();
    };
    let three = [
        task_created(6, "t6"),
        task_created(7, "t7"),
        task_created(8, "t8"),
    ];
    publish_lines((6, 8), &three).await;
    until_followed(&follower, 8).await;
    assert_eq!(monitor.read(|s| s.tasks.len()), 8);
    writes
        .append(&[task_created(9, "t9"), task_created(10, "t10")])
        .await
        .unwrap();
    // Says 9 to 10 but holds only 10; says 9 alone but holds 10: the follower takes what
    // such a message says it holds from the store.
    publish_lines((9, 9), &[task_created(10, "t10-wrong")]).await;
    publish_lines((9, 10), &[task_created(10, "t10-wrong")]).await;
    until_followed(&follower, 10).await;
    assert!(
        monitor.read(|s| s.tasks.contains_key(&"t10".into())),
        "{:?}",
        monitor.read(|s| s.tasks.keys().cloned().collect::<Vec<_>>())
    );
    assert!(!monitor.read(|s| s.tasks.contains_key(&"t10-wrong".into())));

    // Glimpses of an answer being written, from the team's node's monitor to this one's.
    let leader = cohort::monitor::Monitor::new(16);
    let _passing = cohort::node::writing::pass_on(bus.clone(), &leader);
    let mut glimpses = monitor.subscribe_writing();
    // The subscription reaches NATS asynchronously: tell it until it is seen.
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            leader.writing(&"w".into(), &"s1".into(), "so far");
            let got = tokio::time::timeout(Duration::from_millis(200), glimpses.recv()).await;
            if let Ok(Ok(w)) = got {
                return w;
            }
        }
    })
    .await
    .expect("no glimpse reached the follower");
    assert_eq!(
        (seen.step_id.as_str(), seen.text.as_str()),
        ("s1", "so far")
    );
}

/// What an agent's inbox reader gave the agent, and how its receipts go: message 2's is not
/// stored the first time, message 3's takes longer than the inbox's ack wait.
#[derive(Clone, Default)]
struct Taker {
    taken: Arc<Mutex<Vec<u64>>>,
}

impl cohort::node::inbox::Receiver for Taker {
    async fn deliver(&self, no: u64, _message: cohort::message::Message) -> bool {
        self.taken.lock().unwrap().push(no);
        true
    }

    async fn stored(&self, _seq: u64) -> bool {
        let (last, times) = {
            let taken = self.taken.lock().unwrap();
            let last = *taken.last().unwrap();
            (last, taken.iter().filter(|n| **n == last).count())
        };
        match last {
            2 => times > 1,
            3 => {
                tokio::time::sleep(cohort::node::inbox::ACK_WAIT + Duration::from_secs(2)).await;
                true
            }
            _ => true,
        }
    }
}

/// An agent's JetStream inbox, read as its node reads it: in order, one message at a time; one
/// whose receipt was not stored comes again; one whose receipt takes longer than the ack wait
/// is kept in progress meanwhile (it does not come twice); a copy from an older placement is
/// dropped; one from a newer placement stops the reader and waits for the agent's new node,
/// across a restart of NATS (the stream keeps it; the consumer, kept in NATS's memory, is made
/// again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_inbox_delivers_in_order_again_until_stored_and_keeps_a_slow_receipt_in_progress()
{
    use cohort::node::inbox;
    use cohort::node::wire::Hold;
    let mut nats = nats::Nats::start("inbox");
    let options = BusOptions {
        url: nats.url(),
        credentials: Credentials::None,
        tls: Tls::default(),
    };
    let bus = Arc::new(Bus::connect(&options, "inbox", "n").await.unwrap());
    let agent = cohort::ids::AgentId::from("w");
    let hold = |token| Hold { term: 1, token };
    inbox::clear(&bus, &agent).await.unwrap();
    for (token, no) in [(1, 1), (2, 2), (2, 3), (2, 2), (2, 4), (3, 5)] {
        let m = cohort::message::Message::notice(
            "t".into(),
            "a".into(),
            vec![agent.clone()],
            cohort::ids::StageRef::NoRelative,
            format!("message {no}"),
        );
        inbox::put(&bus, &agent, hold(token), no, &m).await.unwrap();
    }
    let taker = Taker::default();
    let reading = inbox::read(&bus, &agent, hold(2), taker.clone());
    tokio::time::timeout(Duration::from_secs(40), reading)
        .await
        .expect("the reader did not stop at the newer placement's message");
    // 1 was an older placement's; the second 2 was the same message put again (JetStream
    // dropped it); 2 came again after its receipt failed; 3 once, though its receipt took
    // longer than the ack wait.
    assert_eq!(*taker.taken.lock().unwrap(), [2, 2, 3, 4]);
    // NATS goes down and comes back: the message waits in the file-backed stream, and the
    // new reader's consumer (NATS kept the old one in memory) is made again.
    nats.restart();
    let next = Taker::default();
    let reader = next.clone();
    let reading = tokio::spawn(async move { inbox::read(&bus, &agent, hold(3), reader).await });
    let deadline = Instant::now() + inbox::ACK_WAIT * 3;
    while next.taken.lock().unwrap().is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    reading.abort();
    assert_eq!(*next.taken.lock().unwrap(), [5]);
}

/// A websocket feed of the states, as a test reads it: the version of its snapshot, every
/// event's version after it (each checked to come later than the one before), the version it
/// is at.
struct Feed {
    socket: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    from: u64,
    seen: Vec<u64>,
    version: u64,
    snapshots: usize,
}

impl Feed {
    /// Opens `node`'s feed with `token`; it must be served by `node` itself, not passed on.
    async fn open(node: &Node, token: &str) -> Feed {
        let url = format!(
            "ws{}/ws?token={token}",
            node.base.trim_start_matches("http")
        );
        let (socket, res) = tokio_tungstenite::connect_async(url).await.unwrap();
        let by = res
            .headers()
            .get("cohort-node")
            .map(|v| v.to_str().unwrap());
        assert_eq!(by, Some(node.name()), "{:?}", res.headers());
        assert!(
            res.headers().get("cohort-via").is_none(),
            "{:?}",
            res.headers()
        );
        let mut feed = Feed {
            socket,
            from: 0,
            seen: Vec::new(),
            version: 0,
            snapshots: 0,
        };
        assert!(feed.next(Duration::from_secs(10)).await, "no snapshot");
        assert_eq!(feed.snapshots, 1);
        feed
    }

    /// Reads one frame (false when the feed ended or `within` passed): a snapshot sets the
    /// version, each event must be the one after it.
    async fn next(&mut self, within: Duration) -> bool {
        use futures::StreamExt;
        let Ok(Some(Ok(frame))) = tokio::time::timeout(within, self.socket.next()).await else {
            return false;
        };
        let Ok(text) = frame.to_text() else {
            return !frame.is_close();
        };
        let frame: Value = serde_json::from_str(text).unwrap_or(Value::Null);
        match frame["type"].as_str() {
            Some("snapshot") => {
                self.snapshots += 1;
                self.version = frame["version"].as_u64().unwrap();
                self.from = self.version;
            }
            Some("events") => {
                for e in frame["events"].as_array().unwrap() {
                    let v = e["version"].as_u64().unwrap();
                    assert!(v > self.version, "an event out of order or twice: {e}");
                    self.version = v;
                    self.seen.push(v);
                }
            }
            _ => {}
        }
        true
    }

    /// Reads until the feed is at `version` (within `within`).
    async fn until(&mut self, version: u64, within: Duration) {
        let deadline = Instant::now() + within;
        while self.version < version {
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                self.next(left).await,
                "the feed stopped at version {} short of {version}",
                self.version
            );
        }
    }
}

impl Node {
    /// The node's name, as its log file starts.
    fn name(&self) -> &str {
        let file = self.log.file_name().unwrap().to_str().unwrap();
        file.split('-').next().unwrap()
    }
}

/// The newest version the store holds.
async fn stored_version(url: &str) -> u64 {
    let store = SqlStore::open_reader(url).await.unwrap();
    let events = store.events_after(0, 1_000_000).await.unwrap();
    events.last().map_or(0, |e| e.version)
}

/// The versions the operator's feed shows of what the store holds after `from` up to `to`:
/// all but other people's private changes.
async fn operators_versions(url: &str, from: u64, to: u64) -> Vec<u64> {
    let store = SqlStore::open_reader(url).await.unwrap();
    let events = store.events_after(from, 1_000_000).await.unwrap();
    events
        .iter()
        .filter(|e| e.version <= to)
        .filter(|e| {
            e.change
                .private_to()
                .is_none_or(|o| o.as_str() == "operator")
        })
        .map(|e| e.version)
        .collect()
}

/// With NATS, a node standing by serves the states feed itself, from the team's event
/// stream: every change once and in order, and on through a kill -9 of the node running the
/// team while another takes over; a logout on the running node ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standing_by_nodes_own_feed_follows_the_event_stream_through_a_takeover() {
    let pg = postgres::Cluster::start("node-feed");
    let nats = nats::Nats::start("node-feed");
    let dir = Scratch::new("node-feed");
    let http = reqwest::Client::new();
    let url = nats.url();
    let more = ["--nats", url.as_str()];
    let mut a = Node::start_with("a", TEAM, &pg.url(), 2, &dir, &more, &[]);
    let token = a.token(&http, Duration::from_secs(60)).await;
    let b = Node::start_with("b", TEAM, &pg.url(), 2, &dir, &more, &[]);
    let c = Node::start_with("c", TEAM, &pg.url(), 2, &dir, &more, &[]);
    b.until_served_by(&http, "a", Duration::from_secs(60)).await;
    c.until_served_by(&http, "a", Duration::from_secs(60)).await;
    run_goal(&http, &a.base, &token, 1).await;
    // A feed refused (its token opens no session) starts nothing: the next, the person's, is
    // passed on to a, as before b's follower has loaded the team.
    let feed_of =
        |n: &Node, token: &str| format!("ws{}/ws?token={token}", n.base.trim_start_matches("http"));
    let refused = tokio_tungstenite::connect_async(feed_of(&b, "nonesuch")).await;
    match refused.map(|(_, res)| res.status()) {
        Err(tokio_tungstenite::tungstenite::Error::Http(res)) => assert_eq!(res.status(), 401),
        other => panic!("a feed with a token of nobody's: {other:?}"),
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, res) = tokio_tungstenite::connect_async(feed_of(&b, &token))
        .await
        .unwrap();
    let via = res
        .headers()
        .get("cohort-via")
        .and_then(|v| v.to_str().ok());
    assert_eq!(
        via,
        Some("b"),
        "served by b's follower, started by the refused feed"
    );
    // The follower loads the team and serves; until then a feed is passed on to a.
    let mut feeds = Vec::new();
    for n in [&b, &c] {
        n.poll("a feed of its own", Duration::from_secs(30), async || {
            let url = format!("ws{}/ws?token={token}", n.base.trim_start_matches("http"));
            let (_, res) = tokio_tungstenite::connect_async(url).await.ok()?;
            (res.headers().get("cohort-node")?.to_str().ok()? == n.name()).then_some(())
        })
        .await;
        feeds.push(Feed::open(n, &token).await);
    }
    for f in &mut feeds {
        f.until(stored_version(&pg.url()).await, Duration::from_secs(20))
            .await;
    }

    a.signal("-KILL");
    a.wait_exit(Duration::from_secs(10));
    let leader = a
        .poll(
            "a node running the team again",
            Duration::from_secs(30),
            async || {
                for n in [&b, &c] {
                    if n.served_by(&http).await.as_deref() == Some(n.name()) {
                        return Some(n.name().to_owned());
                    }
                }
                None
            },
        )
        .await;
    let (lead, stands) = if leader == "b" { (&b, 1) } else { (&c, 0) };
    let before = feeds[stands].version;
    run_goal(&http, &lead.base, &token, 2).await;
    let feed = &mut feeds[stands];
    feed.until(stored_version(&pg.url()).await, Duration::from_secs(20))
        .await;
    assert!(feed.version > before, "nothing after the takeover");
    assert_eq!(feed.snapshots, 1, "the feed lagged and started again");
    // Every change the operator may see, before and after the takeover, once and in order.
    let shown = operators_versions(&pg.url(), feed.from, feed.version).await;
    assert_eq!(feed.seen, shown);

    // A logout on the running node ends the feed on the other within its session check.
    let r = http
        .post(format!("{}/api/logout", lead.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let deadline = Instant::now() + Duration::from_secs(15);
    while feed.next(Duration::from_secs(15)).await {
        assert!(Instant::now() < deadline, "the feed outlived the session");
    }
}

/// Postgres itself restarts (as after a crash) while a goal runs: the node running the team
/// cannot renew its lease and stops; once Postgres is back a node runs the team again, and the
/// goal, acknowledged before, finishes, as does the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_postgres_restart_stalls_the_team_and_it_resumes_with_nothing_lost() {
    let pg = postgres::Cluster::start("node-pg-restart");
    let dir = Scratch::new("node-pg-restart");
    let http = reqwest::Client::new();
    let a = Node::start("a", TEAM, &pg.url(), 2, &dir);
    let token = a.token(&http, Duration::from_secs(60)).await;
    let b = Node::start("b", TEAM, &pg.url(), 2, &dir);
    b.until_served_by(&http, "a", Duration::from_secs(60)).await;
    run_goal(&http, &a.base, &token, 1).await;
    // A goal acknowledged, then Postgres goes down for longer than the lease while it runs.
    assert!(send_goal(&http, &a.base, &token, 2).await);
    pg.restart(Duration::from_secs(3));
    let deadline = Instant::now() + Duration::from_secs(60);
    let leader = loop {
        let mut found = None;
        for (n, name) in [(&a, "a"), (&b, "b")] {
            if n.served_by(&http).await.as_deref() == Some(name) {
                found = Some(n);
            }
        }
        if let Some(n) = found {
            break n;
        }
        assert!(
            Instant::now() < deadline,
            "no node runs the team again:\n{}\n---\n{}",
            a.log(),
            b.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    finish_tasks(&http, &leader.base, &token, 2).await;
    run_goal(&http, &leader.base, &token, 3).await;
    let store = SqlStore::open_reader(&pg.url()).await.unwrap();
    let events = store.events_after(0, 100_000).await.unwrap();
    assert!(events.windows(2).all(|w| w[1].version == w[0].version + 1));
    let (_, leases) = store.placement().await.unwrap();
    assert!(
        leases[0].token >= 2,
        "the lease was taken again: {leases:?}"
    );
}

const SPREAD: &str = "tests/fixtures/spread/team.yaml";

/// What a test of agents spread over nodes runs on: its own Postgres and NATS, a scratch
/// folder for the nodes' logs, and a client.
struct Spreading {
    pg: postgres::Cluster,
    nats: nats::Nats,
    dir: Scratch,
    http: reqwest::Client,
}

impl Spreading {
    fn start(tag: &str) -> Spreading {
        Spreading {
            pg: postgres::Cluster::start(tag),
            nats: nats::Nats::start(tag),
            dir: Scratch::new(tag),
            http: reqwest::Client::new(),
        }
    }

    /// Node `name` of the spread team with lease `lease_secs`, logging what it does.
    fn node(&self, name: &str, lease_secs: u64) -> Node {
        self.node_on(name, lease_secs, &self.nats.url())
    }

    /// The same, reaching NATS at `nats`.
    fn node_on(&self, name: &str, lease_secs: u64, nats: &str) -> Node {
        let (url, info) = (self.pg.url(), [("COHORT_LOG", "info")]);
        Node::start_with(
            name,
            SPREAD,
            &url,
            lease_secs,
            &self.dir,
            &["--nats", nats],
            &info,
        )
    }
}

/// Waits until the writer's think step runs (the goal's first slow step).
async fn until_the_writer_thinks(http: &reqwest::Client, a: &Node, token: &str) {
    a.poll("the writer thinking", Duration::from_secs(30), async || {
        let steps = steps_of(http, &a.base, token, "writer").await;
        steps
            .iter()
            .any(|(e, s)| e == "think" && s == "running")
            .then_some(())
    })
    .await;
}

/// Which node holds each agent's lease, as the store says.
async fn agent_leases(url: &str) -> std::collections::BTreeMap<String, String> {
    let store = SqlStore::open_reader(url).await.unwrap();
    let (_, leases) = store.placement().await.unwrap();
    leases
        .into_iter()
        .filter_map(|l| Some((l.resource.strip_prefix("agent/")?.to_owned(), l.node)))
        .collect()
}

/// Waits until the store shows an agent's lease held by each of `nodes`.
async fn until_spread_over(
    url: &str,
    nodes: &[&str],
    within: Duration,
) -> std::collections::BTreeMap<String, String> {
    let deadline = Instant::now() + within;
    loop {
        let leases = agent_leases(url).await;
        if nodes.iter().all(|n| leases.values().any(|v| v == n)) {
            return leases;
        }
        assert!(
            Instant::now() < deadline,
            "agents not spread over {nodes:?}: {leases:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What `GET url` answers the holder of `token`, as JSON.
async fn get_json(http: &reqwest::Client, url: String, token: &str) -> Value {
    let r = http.get(url).bearer_auth(token).send().await.unwrap();
    r.json().await.unwrap()
}

/// The steps of `agent` on `base`, as `(executor, execution_state)`.
async fn steps_of(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    agent: &str,
) -> Vec<(String, String)> {
    let all = get_json(http, format!("{base}/api/states?type=step"), token).await;
    all.as_object()
        .unwrap()
        .values()
        .filter(|s| s["agent_id"] == agent)
        .map(|s| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (text(&s["executor"]), text(&s["execution_state"]))
        })
        .collect()
}

/// With NATS, the team's agents spread over the live nodes: the node running the team keeps
/// SyncState and a share, and a joining node takes a share. A goal's messages and waits cross
/// between them (the writer waits for the reviewer's reply from the other node). The writer's
/// node is killed while its step runs there: the writer runs on the team's node again, from
/// the record, its step runs again, and the goal finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_teams_agents_spread_over_the_nodes_and_a_dead_nodes_agents_carry_on_elsewhere() {
    let t = Spreading::start("node-spread");
    let (pg, http) = (&t.pg, &t.http);
    let a = t.node("a", 2);
    let token = a.token(http, Duration::from_secs(60)).await;
    let mut b = t.node("b", 2);
    let leases = until_spread_over(&pg.url(), &["a", "b"], Duration::from_secs(30)).await;
    assert_eq!(leases.len(), 3, "{leases:?}");
    assert_eq!(leases["writer"], "b", "{leases:?}");
    let headers = traceparents_on_nats(&t.nats).await;
    assert!(send_goal(http, &a.base, &token, 1).await);
    until_the_writer_thinks(http, &a, &token).await;
    // The calls that carried the goal's messages between the nodes named its trace in a W3C
    // `traceparent` header.
    let tasks = tasks_on(http, &a.base, &token).await;
    let task = tasks.values().find(|t| t["task_name"] != "MAS base task");
    let trace = task.and_then(|t| t["trace_id"].as_str());
    let trace = trace.unwrap_or_else(|| panic!("{tasks:?}")).to_owned();
    // The watcher reads NATS on a task of its own, which a loaded machine may run late: the
    // header is waited for (10 s), not looked for once.
    let in_trace = |seen: &[String]| seen.iter().any(|h| h.starts_with(&format!("00-{trace}-")));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !in_trace(&headers.lock().unwrap()) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seen = headers.lock().unwrap().clone();
    assert!(in_trace(&seen), "no call in trace {trace}: {seen:?}");
    assert!(
        b.log().contains("the agent runs on this node"),
        "{}",
        b.log()
    );
    // The goal's messages to the writer on node b went through its JetStream inbox: a
    // durable consumer of its own, read one at a time, each acknowledged once taken.
    let inbox = inbox_of(&t.nats, "spread", "writer").await;
    assert_eq!(inbox.config.max_ack_pending, 1, "{inbox:?}");
    assert!(inbox.ack_floor.stream_sequence > 0, "{inbox:?}");
    // `cohort inspect --nats` lists it with its lag.
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["inspect", "--database", &pg.url(), "--nats", &t.nats.url()])
        .args(["--team", SPREAD])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        table.contains("Inboxes (JetStream stream COHORT_spread_INBOX)"),
        "{table}"
    );
    assert!(table.contains("inbox-writer"), "{table}");
    b.signal("-KILL");
    b.wait_exit(Duration::from_secs(10));
    finish_tasks(http, &a.base, &token, 1).await;
    assert_eq!(agent_leases(&pg.url()).await["writer"], "a");
    // The think cut off on node b is settled as interrupted and runs again, once; every other
    // step of the writer finished, none twice.
    let steps = steps_of(http, &a.base, &token, "writer").await;
    let ended = |x: &str, st: &str| steps.iter().filter(|(e, s)| e == x && s == st).count();
    assert_eq!(ended("think", "failed"), 1, "{steps:?}");
    assert_eq!(ended("think", "finished"), 2, "{steps:?}");
    assert_eq!(ended("send_message", "finished"), 1, "{steps:?}");
    assert_eq!(steps.len(), 11, "{steps:?}");
    // The model calls the writer made on node b reached the team's call log: its plan's
    // call is there to read, as sent.
    let all = get_json(http, format!("{}/api/states?type=step", a.base), &token).await;
    let plan = all.as_object().unwrap().values();
    let plan = plan
        .filter(|s| s["agent_id"] == "writer" && s["executor"] == "planning")
        .find_map(|s| s["step_id"].as_str())
        .unwrap();
    let calls = get_json(http, format!("{}/api/step/{plan}/calls", a.base), &token).await;
    let calls = calls["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert!(calls[0]["prompt"].as_str().unwrap().len() > 100);
    assert_eq!(calls[0]["agent_id"], "writer");
    assert!(
        a.log().contains("agents moved between the team's nodes"),
        "{}",
        a.log()
    );
}

/// The node running the team dies while agents run on the other two: one of them takes the
/// team over, places every agent again from the record (the ones still running under the dead
/// node's term are stopped: their changes would be refused), and the goal finishes. The other
/// then stops with SIGTERM: its agents land, are stored and run on the team's node at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn when_the_teams_node_dies_its_successor_places_the_agents_again_from_the_record() {
    let t = Spreading::start("node-spread-lead");
    let (pg, http) = (&t.pg, &t.http);
    let mut a = t.node("a", 2);
    let token = a.token(http, Duration::from_secs(60)).await;
    let mut b = t.node("b", 2);
    let c = t.node("c", 2);
    until_spread_over(&pg.url(), &["a", "b", "c"], Duration::from_secs(30)).await;
    assert!(send_goal(http, &a.base, &token, 1).await);
    until_the_writer_thinks(http, &a, &token).await;
    a.signal("-KILL");
    a.wait_exit(Duration::from_secs(10));
    // Whichever of b and c runs the team now, either serves.
    let token = b.token(http, Duration::from_secs(30)).await;
    finish_tasks(http, &b.base, &token, 1).await;
    let leases = until_spread_over(&pg.url(), &["b", "c"], Duration::from_secs(30)).await;
    assert!(leases.values().all(|n| n != "a"), "{leases:?}");
    let steps = steps_of(http, &b.base, &token, "writer").await;
    let think = |st: &str| {
        steps
            .iter()
            .filter(|(e, s)| e == "think" && s == st)
            .count()
    };
    assert_eq!(think("finished"), 2, "{steps:?}");
    assert!(think("failed") <= 1, "{steps:?}");
    // b stops on SIGTERM: its agents are let go, stored, and run on c (or b was the team's
    // node: c takes the team over). Nothing is left on b.
    b.signal("-TERM");
    assert!(
        b.wait_exit(Duration::from_secs(30)).success(),
        "{}",
        b.log()
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    while agent_leases(&pg.url()).await.values().any(|n| n != "c") {
        assert!(Instant::now() < deadline, "{}", c.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let token = c.token(http, Duration::from_secs(30)).await;
    let tasks = tasks_on(http, &c.base, &token).await;
    assert!(
        tasks.values().any(|t| t["execution_state"] == "finished"),
        "{tasks:?}"
    );
}

/// The console of a team across machines, in headless Chromium (`tests/web/nodes.test.mjs`):
/// the nodes in the topbar, the node on each agent's card, and a killed node marked gone while
/// its agent's card names the node it runs on again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_which_node_runs_each_agent_and_marks_a_node_that_went_away() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    assert!(
        root.join("tests/web/node_modules/playwright-core/package.json")
            .is_file(),
        "run .ci/run: it installs the browser test's client (npm ci --prefix tests/web)"
    );
    let t = Spreading::start("node-console");
    let (pg, http) = (&t.pg, &t.http);
    let a = t.node("a", 2);
    a.token(http, Duration::from_secs(60)).await;
    let b = t.node("b", 2);
    until_spread_over(&pg.url(), &["a", "b"], Duration::from_secs(30)).await;
    let shot = root.join("target/web-console-nodes.png");
    let out = tokio::process::Command::new("node")
        .current_dir(root)
        .arg("tests/web/nodes.test.mjs")
        .env("COHORT_URL", &a.base)
        .env("COHORT_USER", "operator")
        .env("COHORT_PASSWORD", "cohort-demo")
        .env("COHORT_KILL_PID", b.child.id().to_string())
        .env("COHORT_SCREENSHOT", &shot)
        .env("COHORT_CHROMIUM", "/usr/bin/chromium")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(180), out)
        .await
        .expect("the browser test ended within 3 minutes")
        .expect("node runs");
    assert!(
        out.status.success(),
        "{}\n{}\nnode a:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        a.log()
    );
}

/// A node that runs an agent is killed and started again at once under its name: the team's
/// node sees another process serving as it, places the agent again from the record (it does
/// not wait for a node that is back), and a goal finishes across the two.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_restarted_at_once_under_its_name_gets_its_agents_again_from_the_record() {
    let t = Spreading::start("node-spread-restart");
    let (pg, http) = (&t.pg, &t.http);
    let a = t.node("a", 10);
    let token = a.token(http, Duration::from_secs(60)).await;
    let mut b = t.node("b", 10);
    until_spread_over(&pg.url(), &["a", "b"], Duration::from_secs(30)).await;
    b.signal("-KILL");
    b.wait_exit(Duration::from_secs(10));
    let b = t.node("b", 10);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !b.log().contains("the agent runs on this node") {
        assert!(
            Instant::now() < deadline,
            "the restarted node got no agent (lease 10 s: not by waiting it out):\n{}\n{}",
            b.log(),
            a.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    run_goal(http, &a.base, &token, 1).await;
}

/// A node that runs an agent is cut off from NATS (its connection dropped) while it still says
/// it is alive in the store: messages for its agent find no answer, the agent is placed on the
/// team's node again from the record, and the goal finishes; nothing it ran is applied twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_cut_off_from_nats_loses_its_agents_to_the_others_and_the_goal_finishes() {
    let t = Spreading::start("node-nats-cut");
    let (pg, http) = (&t.pg, &t.http);
    let port: u16 = t.nats.url().rsplit(':').next().unwrap().parse().unwrap();
    let proxy = Proxy::start(port).await;
    let a = t.node("a", 10);
    let token = a.token(http, Duration::from_secs(60)).await;
    let b = t.node_on("b", 10, &format!("nats://127.0.0.1:{}", proxy.port));
    let leases = until_spread_over(&pg.url(), &["a", "b"], Duration::from_secs(30)).await;
    assert_eq!(leases["writer"], "b", "{leases:?}");
    proxy.cut();
    run_goal(http, &a.base, &token, 1).await;
    assert_eq!(agent_leases(&pg.url()).await["writer"], "a", "{}", a.log());
    let steps = steps_of(http, &a.base, &token, "writer").await;
    let ended = |x: &str, st: &str| steps.iter().filter(|(e, s)| e == x && s == st).count();
    assert_eq!(ended("think", "finished"), 2, "{steps:?}");
    assert_eq!(ended("send_message", "finished"), 1, "{steps:?}");
    // NATS comes back to b: its old copy of the writer reads nothing of the inbox it had (a
    // new placement started it afresh), and whatever it still tries is refused, so the
    // writer's record stays as it was.
    proxy.restore();
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(steps_of(http, &a.base, &token, "writer").await, steps);
    drop(b);
}
