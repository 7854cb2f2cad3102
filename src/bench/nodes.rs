//! A team across machines, as a person runs it: `cohort serve` processes on one Postgres
//! cluster. First the time a goal takes on Postgres alone, as one node (`--node`: every write
//! checks the team's lease), and as one node with NATS (`--nats`: every change also published
//! on the team's event stream), in rounds side by side so the machine's noise falls on all
//! three; then three nodes of one team, the node running it killed with kill -9 again and
//! again (how long until another runs it) and stopped with SIGTERM (how long until the lease it
//! gave up is taken); last, a goal of a wide team (one stage for every worker, 10 calls each,
//! 200 ms a call) on one node with NATS and with its agents spread over three nodes, beside its
//! critical path (the calls one after another on the longest chain).

use super::client::Client;
use super::scenarios::Figures;
use super::serve::PASSWORD;
use super::servers::{Nats, Postgres, busy_share, cpu_seconds, machine_ticks};
use super::team::{Scratch, TeamShape, write_team};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The lease of the fail-over part: a node that dies is replaced within about this long.
const LEASE_SECS: u64 = 2;

/// One `cohort serve` child.
struct Served {
    child: Child,
    addr: SocketAddr,
    log: std::path::PathBuf,
}

impl Served {
    fn start(team: &Path, url: &str, more: &[&str]) -> Result<Served, String> {
        static STARTED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let log = team.with_file_name(format!("serve-{n}.log"));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let child = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
            .args(["serve", "--team"])
            .arg(team)
            .args(["--bind", &addr.to_string(), "--database", url])
            .args(more)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| e.to_string())?;
        Ok(Served { child, addr, log })
    }

    /// The end of what the process said, for an error.
    fn said(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(5)..].join("\n")
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn term(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The model's latency of the second set of goals (the figure is at 200 ms a call).
const SLOW_MS: u64 = 200;

/// `goals` goals in each of three ways of serving with instant replies, `slow_goals` with
/// replies after `SLOW_MS`, then `kills` kills and SIGTERMs of three nodes, then a goal of
/// `spread_workers` workers on one node and spread over three.
pub fn nodes(goals: usize, slow_goals: usize, kills: usize, spread_workers: usize) -> Figures {
    let pg = Postgres::start("bench-nodes")?;
    let nats = Nats::start("bench-nodes", None)?;
    let hash = crate::auth::hash_password(PASSWORD)?;
    let team = |name: &str, delay_ms: u64, goals: usize| {
        let scratch = Scratch::new(name).map_err(|e| e.to_string())?;
        let shape = TeamShape {
            workers: 2,
            steps: 3,
            delay_ms,
            max_in_flight: 64,
            goals: goals + 1,
        };
        let file = write_team(&scratch.0, shape, Some(&hash)).map_err(|e| e.to_string())?;
        Ok::<_, String>((scratch, file))
    };
    let (_instant_dir, instant) = team("nodes", 0, goals)?;
    let (_slow_dir, slow) = team("nodes-slow", SLOW_MS, slow_goals)?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let per_goal = goal_times(&pg, &nats, &instant, "instant", goals).await?;
        let per_slow_goal = goal_times(&pg, &nats, &slow, "slow", slow_goals).await?;
        let url = pg.create_database("failover")?;
        let failover =
            failover(&named(&instant, "failover", "")?, &url, &nats.url(), kills).await?;
        let spread = spread_goal(&pg, &nats, &hash, spread_workers).await?;
        Ok(json!({
            "goals": goals, "ms_per_goal": per_goal,
            "slow_goals": slow_goals, "slow_ms": SLOW_MS, "ms_per_slow_goal": per_slow_goal,
            "failover": failover, "spread": spread,
        }))
    })
}

/// Mean milliseconds a goal takes, served each way (rounds interleaved), each on a database
/// of its own named after `set`.
async fn goal_times(
    pg: &Postgres,
    nats: &Nats,
    team: &Path,
    set: &str,
    goals: usize,
) -> Result<Value, String> {
    let nats_url = nats.url();
    let ways: [(&str, Vec<&str>); 3] = [
        ("alone", vec![]),
        ("node", vec!["--node", "a"]),
        ("node_nats", vec!["--node", "a", "--nats", &nats_url]),
    ];
    let mut served = Vec::new();
    for (name, more) in &ways {
        let db = format!("{set}_{name}");
        let url = pg.create_database(&db)?;
        let s = Served::start(&named(team, &db, "")?, &url, more)?;
        let client = login(s.addr, Duration::from_secs(60)).await?;
        served.push((name, s, client, Vec::new()));
    }
    const ROUNDS: usize = 3;
    let mut sent = 0;
    for round in 0..ROUNDS {
        let n = goals / ROUNDS + usize::from(round < goals % ROUNDS);
        for (_, _, client, took) in &mut served {
            for k in 0..n {
                let started = Instant::now();
                run_goal(client, sent + k + 1).await?;
                took.push(started.elapsed().as_secs_f64() * 1000.0);
            }
        }
        sent += n;
    }
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    Ok(served
        .iter()
        .map(|(name, _, _, took)| (name.to_string(), json!(mean(took))))
        .collect::<serde_json::Map<_, _>>()
        .into())
}

/// Logs the operator in on `addr` once it serves the team (a standing-by node answers 503).
async fn login(addr: SocketAddr, within: Duration) -> Result<Client, String> {
    let deadline = Instant::now() + within;
    loop {
        match Client::login(addr).await {
            Ok(c) => return Ok(c),
            Err(e) if Instant::now() > deadline => return Err(format!("{addr}: {e}")),
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Sends the operator's goal and waits until `finished` tasks besides the base task are.
async fn run_goal(client: &Client, finished: usize) -> Result<(), String> {
    let status = client.send("manager", format!("goal {finished}")).await;
    if status != 200 {
        return Err(format!("goal {finished}: {status}"));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (_, tasks, _) = client.get("/api/states?type=task").await?;
        let done = tasks.as_object().map_or(0, |t| {
            t.values()
                .filter(|t| t["execution_state"] == "finished" && t["task_name"] != "MAS base task")
                .count()
        });
        if done >= finished {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("goal {finished} did not finish within 60 s"));
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Three nodes; the one running the team is killed `kills` times (and started again), then
/// stopped with SIGTERM `kills` times: seconds until another node serves the team.
async fn failover(team: &Path, url: &str, nats: &str, kills: usize) -> Result<Value, String> {
    let names = ["n1", "n2", "n3"];
    let lease = LEASE_SECS.to_string();
    let start = |name: &str| {
        Served::start(
            team,
            url,
            &["--node", name, "--lease-secs", &lease, "--nats", nats],
        )
    };
    let mut nodes: Vec<Served> = names.iter().map(|n| start(n)).collect::<Result<_, _>>()?;
    let (mut leader, token) = leading(&nodes, None).await?;
    let mut killed = Vec::new();
    let mut stopped = Vec::new();
    for k in 0..kills * 2 {
        let at = Instant::now();
        if k < kills {
            nodes[leader].kill();
        } else {
            nodes[leader].term();
        }
        let was = leader;
        (leader, _) = leading(&nodes, Some(&token)).await?;
        let s = at.elapsed().as_secs_f64();
        if k < kills {
            killed.push(s)
        } else {
            stopped.push(s)
        }
        nodes[was] = start(names[was])?;
    }
    Ok(
        json!({"lease_s": LEASE_SECS, "after_kill_s": spread(&mut killed), "after_sigterm_s": spread(&mut stopped)}),
    )
}

/// The node serving the team (logging in on it when no `token` is given): its index and the
/// operator's token. Waits up to a minute.
async fn leading(nodes: &[Served], token: Option<&str>) -> Result<(usize, String), String> {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        for (i, n) in nodes.iter().enumerate() {
            match token {
                None => {
                    if let Ok(c) = Client::login(n.addr).await {
                        return Ok((i, c.token));
                    }
                }
                Some(t) => {
                    let r = http
                        .get(format!("http://{}/api/states?type=task", n.addr))
                        .bearer_auth(t)
                        .send()
                        .await;
                    if r.is_ok_and(|r| r.status().is_success()) {
                        return Ok((i, t.to_owned()));
                    }
                }
            }
        }
        if Instant::now() > deadline {
            let said: Vec<String> = nodes.iter().map(Served::said).collect();
            return Err(format!(
                "no node served the team within 60 s:\n{}",
                said.join("\n---\n")
            ));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Think steps of each worker of the spread team: with planning, reflection and summary, ten
/// model calls.
const SPREAD_STEPS: usize = 7;

/// One goal of a team of `workers` (each making ten calls of [`SLOW_MS`]), first on one node
/// with NATS (recording every model call, then none), then with its agents spread over three
/// nodes (once every node holds its share): seconds until the task finished, and the critical
/// path.
async fn spread_goal(
    pg: &Postgres,
    nats: &Nats,
    hash: &str,
    workers: usize,
) -> Result<Value, String> {
    let scratch = Scratch::new("nodes-spread").map_err(|e| e.to_string())?;
    let shape = TeamShape {
        workers,
        steps: SPREAD_STEPS,
        delay_ms: SLOW_MS,
        max_in_flight: workers.max(1) * 2,
        goals: 1,
    };
    let team = write_team(&scratch.0, shape, Some(hash)).map_err(|e| e.to_string())?;
    let calls = super::team::MANAGER_CALLS + super::team::worker_calls(SPREAD_STEPS);
    let critical_s = (calls * SLOW_MS) as f64 / 1000.0;
    let nats_url = nats.url();
    let more = |name: &'static str| ["--node", name, "--nats", nats_url.as_str()];
    let mut one_node = Vec::new();
    // The same team with no model call recorded: what recording costs on Postgres.
    let unrecorded = "retention:\n  recorded_calls_mib: 0\n";
    for (db, more_yaml) in [("spread_one", ""), ("spread_unrecorded", unrecorded)] {
        let url = pg.create_database(db)?;
        let node = Served::start(&named(&team, db, more_yaml)?, &url, &more("a"))?;
        let client = login(node.addr, Duration::from_secs(120)).await?;
        let cpu = CpuUse::from(pg, nats, &[&node]);
        let at = Instant::now();
        run_goal(&client, 1).await?;
        one_node.push((at.elapsed().as_secs_f64(), cpu.since()));
    }
    let url = pg.create_database("spread_three")?;
    let team = named(&team, "spread_three", "")?;
    let mut nodes = vec![Served::start(&team, &url, &more("a"))?];
    let client = login(nodes[0].addr, Duration::from_secs(120)).await?;
    nodes.push(Served::start(&team, &url, &more("b"))?);
    nodes.push(Served::start(&team, &url, &more("c"))?);
    let placed_at = Instant::now();
    let shares = spread_over(&url, 3, workers + 1).await?;
    let placed_s = placed_at.elapsed().as_secs_f64();
    let cpu = CpuUse::from(pg, nats, &nodes.iter().collect::<Vec<_>>());
    let at = Instant::now();
    run_goal(&client, 1).await?;
    let three = at.elapsed().as_secs_f64();
    Ok(json!({
        "workers": workers, "calls": calls, "critical_s": critical_s,
        "one_node_s": one_node[0].0, "one_node_unrecorded_s": one_node[1].0, "three_nodes_s": three, "placed_s": placed_s, "shares": shares,
        "one_node_cpu": one_node[0].1, "three_nodes_cpu": cpu.since(),
        "one_node_gaps_ms": call_gaps(&pg.url_of("spread_one")).await?,
        "three_nodes_gaps_ms": call_gaps(&url).await?,
    }))
}

/// The milliseconds between one of a worker's model calls being answered and its next being
/// sent (what a step costs beside its model), read from the calls the store recorded: the
/// median and 90th percentile of all workers', and the median of the workers of each node;
/// and the goal's [`timeline`].
async fn call_gaps(url: &str) -> Result<Value, String> {
    let store = crate::store::SqlStore::open_reader(url)
        .await
        .map_err(|e| e.to_string())?;
    let calls = crate::store::Store::model_calls(&store, None, 0, 1_000_000)
        .await
        .map_err(|e| e.to_string())?;
    let (_, leases) = store.placement().await.map_err(|e| e.to_string())?;
    let node_of: std::collections::HashMap<String, String> = leases
        .into_iter()
        .filter_map(|l| Some((l.resource.strip_prefix("agent/")?.to_owned(), l.node)))
        .collect();
    // Each agent's (sent, answered), in the order they were sent.
    let mut by_agent: std::collections::BTreeMap<String, Vec<(i64, i64)>> = Default::default();
    for c in calls {
        let body: Value = serde_json::from_str(&c.body).map_err(|e| e.to_string())?;
        let (Some(sent), Some(answered)) = (body["sent_at"].as_i64(), body["answered_at"].as_i64())
        else {
            continue;
        };
        by_agent
            .entry(c.agent_id.to_string())
            .or_default()
            .push((sent, answered));
    }
    by_agent.values_mut().for_each(|calls| calls.sort());
    let timeline = timeline(&by_agent, &node_of);
    let mut all = Vec::new();
    let mut by_node: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for (agent, calls) in by_agent.into_iter().filter(|(a, _)| a != "manager") {
        let gaps = calls.windows(2).map(|w| (w[1].0 - w[0].1) as f64);
        let node = node_of.get(&agent).cloned().unwrap_or_else(|| "-".into());
        for g in gaps {
            all.push(g);
            by_node.entry(node.clone()).or_default().push(g);
        }
    }
    let pick = |xs: &mut Vec<f64>, q: f64| {
        xs.sort_by(f64::total_cmp);
        xs.get(((xs.len() as f64 - 1.0) * q).round() as usize)
            .copied()
    };
    let nodes: serde_json::Map<String, Value> = by_node
        .iter_mut()
        .map(|(n, xs)| (n.clone(), json!(pick(xs, 0.5))))
        .collect();
    Ok(
        json!({"median": pick(&mut all, 0.5), "p90": pick(&mut all, 0.9), "by_node": nodes, "timeline": timeline}),
    )
}

/// Where a goal's time went, in seconds from its first call: each of the manager's calls
/// (sent–answered), and when the workers sent their first call and had their last answer
/// (median and last), of all and of each node's (`node_of`); `by_agent`, each agent's calls in
/// order.
fn timeline(
    by_agent: &std::collections::BTreeMap<String, Vec<(i64, i64)>>,
    node_of: &std::collections::HashMap<String, String>,
) -> Value {
    let Some(t0) = by_agent
        .values()
        .filter_map(|c| c.first())
        .map(|c| c.0)
        .min()
    else {
        return Value::Null;
    };
    let s = |ms: i64| ((ms - t0) as f64 / 1000.0 * 100.0).round() / 100.0;
    let manager: Vec<Value> = by_agent
        .get("manager")
        .into_iter()
        .flatten()
        .map(|&(sent, answered)| json!([s(sent), s(answered)]))
        .collect();
    let workers: Vec<(&String, &Vec<(i64, i64)>)> = by_agent
        .iter()
        .filter(|(a, _)| a.as_str() != "manager")
        .collect();
    fn sorted(xs: impl Iterator<Item = i64>) -> Vec<i64> {
        let mut xs: Vec<i64> = xs.collect();
        xs.sort();
        xs
    }
    let median_last = |xs: &[i64]| {
        json!([
            xs.get(xs.len() / 2).map(|&x| s(x)),
            xs.last().map(|&x| s(x))
        ])
    };
    // When the workers of some (or all) nodes sent their first call and had their last answer.
    let first_last = |on: &dyn Fn(&str) -> bool| {
        let of = || workers.iter().filter(|(a, _)| on(a)).map(|(_, c)| c);
        json!([
            median_last(&sorted(of().filter_map(|c| c.first()).map(|c| c.0))),
            median_last(&sorted(of().filter_map(|c| c.last()).map(|c| c.1))),
        ])
    };
    let mut nodes: Vec<&String> = node_of.values().collect();
    nodes.sort();
    nodes.dedup();
    let by_node: serde_json::Map<String, Value> = nodes
        .into_iter()
        .map(|n| (n.clone(), first_last(&|a| node_of.get(a) == Some(n))))
        .collect();
    let all = first_last(&|_| true);
    let took = sorted(
        workers
            .iter()
            .flat_map(|(_, c)| c.iter().map(|(sent, answered)| answered - sent)),
    );
    let at = |q: f64| took.get(((took.len() as f64 - 1.0) * q) as usize);
    json!({
        "call_ms": [at(0.5), at(0.9), took.last()],
        "manager": manager,
        "workers_first": all[0],
        "workers_last": all[1],
        "by_node": by_node,
    })
}

/// Where the machine's CPU went while a goal ran: the seconds of each node, of Postgres (all
/// its processes) and of NATS, and the share of the machine's time that was busy. Three nodes,
/// NATS and Postgres on two cores share them: this tells a goal that waited for the CPU from
/// one that waited on something else.
struct CpuUse {
    pids: Vec<(String, u32)>,
    before: Vec<f64>,
    ticks: (u64, u64),
}

impl CpuUse {
    fn from(pg: &Postgres, nats: &Nats, nodes: &[&Served]) -> CpuUse {
        let mut pids: Vec<(String, u32)> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (format!("node_{}", (b'a' + i as u8) as char), n.child.id()))
            .collect();
        pids.extend(pg.pid().map(|pid| ("postgres".to_owned(), pid)));
        pids.push(("nats".to_owned(), nats.pid()));
        let before = cpu_seconds(&pids.iter().map(|(_, pid)| *pid).collect::<Vec<_>>());
        CpuUse {
            pids,
            before,
            ticks: machine_ticks(),
        }
    }

    fn since(&self) -> Value {
        let now = cpu_seconds(&self.pids.iter().map(|(_, pid)| *pid).collect::<Vec<_>>());
        let mut out = serde_json::Map::new();
        for (((name, _), before), now) in self.pids.iter().zip(&self.before).zip(now) {
            out.insert(name.clone(), json!(now - before));
        }
        out.insert(
            "busy".into(),
            json!(busy_share(self.ticks, machine_ticks())),
        );
        Value::Object(out)
    }
}

/// Waits until the agents' leases in the store at `url` are held by `nodes` nodes, `agents` in
/// all, each holding its even share (the placer moves nothing more); the agents each node
/// holds.
async fn spread_over(url: &str, nodes: usize, agents: usize) -> Result<Value, String> {
    let store = crate::store::SqlStore::open_reader(url)
        .await
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let (_, leases) = store.placement().await.map_err(|e| e.to_string())?;
        let mut held: std::collections::BTreeMap<String, usize> = Default::default();
        for l in leases.iter().filter(|l| l.resource.starts_with("agent/")) {
            *held.entry(l.node.clone()).or_default() += 1;
        }
        let even = agents / nodes;
        if held.len() == nodes && held.values().all(|n| *n >= even) {
            return Ok(json!(held));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the agents were not spread over {nodes} nodes: {held:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A copy of the bench team `team` named `name` (so its streams on the bench's one NATS are
/// its own: a stream holding another store's events is refused), with `more` YAML after it.
fn named(team: &Path, name: &str, more: &str) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string(team).map_err(|e| e.to_string())?;
    let body = text
        .strip_prefix("name: bench\n")
        .ok_or("the bench team's file starts with its name")?;
    let file = team.with_file_name(format!("{name}.yaml"));
    std::fs::write(&file, format!("name: {name}\n{body}{more}")).map_err(|e| e.to_string())?;
    Ok(file)
}

/// Median and most of `xs`.
fn spread(xs: &mut [f64]) -> Value {
    xs.sort_by(f64::total_cmp);
    json!({"median": xs.get(xs.len() / 2), "most": xs.last(), "n": xs.len()})
}

/// The scenario's job.
pub(super) fn job(quick: bool) -> super::Job {
    super::Job::Nodes {
        goals: if quick { 3 } else { 30 },
        slow_goals: if quick { 1 } else { 6 },
        kills: if quick { 1 } else { 5 },
        spread_workers: if quick { 20 } else { 1000 },
    }
}

/// The table's lines.
pub(super) fn rows(v: &Value) -> Vec<super::Row> {
    let f = super::f;
    let ways = |per: &Value| {
        let (pg, node, with_nats) = (f(&per["alone"]), f(&per["node"]), f(&per["node_nats"]));
        format!(
            "Postgres {pg:.0}; one node {node:.0} ({:.2}×); one node + NATS {with_nats:.0} ({:.2}×)",
            node / pg,
            with_nats / pg
        )
    };
    let fo = &v["failover"];
    vec![
        super::row(
            "nodes",
            format!(
                "{} goals each way, instant replies (2 workers, 3 steps): ms a goal",
                v["goals"]
            ),
            ways(&v["ms_per_goal"]),
            "",
        ),
        super::row(
            "nodes",
            format!(
                "{} goals each way, {} ms a reply: ms a goal",
                v["slow_goals"], v["slow_ms"]
            ),
            ways(&v["ms_per_slow_goal"]),
            "one node with NATS ≤ 1.1× Postgres alone",
        ),
        super::row(
            "nodes",
            format!(
                "3 nodes, lease {} s: the team served again after",
                fo["lease_s"]
            ),
            format!(
                "kill -9: {:.2} s median, {:.2} s most; SIGTERM: {:.2} s median, {:.2} s most",
                f(&fo["after_kill_s"]["median"]),
                f(&fo["after_kill_s"]["most"]),
                f(&fo["after_sigterm_s"]["median"]),
                f(&fo["after_sigterm_s"]["most"])
            ),
            "≤ lease + 2 s after kill -9",
        ),
    ]
    .into_iter()
    .chain(spread_rows(v))
    .collect()
}

/// The wide goal's lines.
fn spread_rows(v: &Value) -> Vec<super::Row> {
    let f = super::f;
    let sp = &v["spread"];
    vec![
        super::row(
            "nodes",
            format!(
                "a goal of {} workers × 10 calls of {} ms (critical path {} calls, {:.1} s): s",
                sp["workers"],
                v["slow_ms"],
                sp["calls"],
                f(&sp["critical_s"])
            ),
            format!(
                "one node + NATS {:.2} ({:.2}×; {:.2} recording no call); three nodes {:.2} ({:.2}×), agents {} (placed in {:.1} s)",
                f(&sp["one_node_s"]),
                f(&sp["one_node_s"]) / f(&sp["critical_s"]),
                f(&sp["one_node_unrecorded_s"]),
                f(&sp["three_nodes_s"]),
                f(&sp["three_nodes_s"]) / f(&sp["critical_s"]),
                sp["shares"],
                f(&sp["placed_s"]),
            ),
            "three nodes ≤ 1.3× the critical path",
        ),
        one_and_three(sp, "CPU seconds (machine busy)", "cpu", cpu_line),
        one_and_three(sp, "s from its first call", "gaps_ms", timeline_line),
        one_and_three(
            sp,
            "ms between a worker's answer and its next call",
            "gaps_ms",
            gaps_line,
        ),
    ]
}

/// A line of the wide goal's `figure` on one node and on three (`one_node_<key>`,
/// `three_nodes_<key>`), each written by `line`.
fn one_and_three(sp: &Value, figure: &str, key: &str, line: fn(&Value) -> String) -> super::Row {
    super::row(
        "nodes",
        format!("the same goal: {figure}"),
        format!(
            "one node: {}; three nodes: {}",
            line(&sp[format!("one_node_{key}")]),
            line(&sp[format!("three_nodes_{key}")])
        ),
        "",
    )
}

/// `manager's calls 0.00 / 0.21, 0.21 / 0.41, …; workers' first call 0.47 / 0.50, last answer
/// 2.59 / 2.65 (median / last; by node: a 0.47 / 0.50, 2.59 / 2.65); a worker's call 208 /
/// 213 / 221 ms (median / p90 / most)`.
fn timeline_line(gaps: &Value) -> String {
    let t = &gaps["timeline"];
    let pair = |v: &Value| format!("{:.2} / {:.2}", super::f(&v[0]), super::f(&v[1]));
    let manager: Vec<String> = t["manager"]
        .as_array()
        .into_iter()
        .flatten()
        .map(pair)
        .collect();
    let took = &t["call_ms"];
    let by_node: Vec<String> = t["by_node"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(node, fl)| format!("{node} {}, {}", pair(&fl[0]), pair(&fl[1])))
        .collect();
    format!(
        "manager's calls {}; workers' first call {}, last answer {} (median / last; by node: {}); a worker's call {} / {} / {} ms (median / p90 / most)",
        manager.join(", "),
        pair(&t["workers_first"]),
        pair(&t["workers_last"]),
        by_node.join("; "),
        took[0],
        took[1],
        took[2]
    )
}

/// `median 4, p90 21 (median by node: a 7, b 49, c 50)`.
fn gaps_line(gaps: &Value) -> String {
    let by_node: Vec<String> = gaps["by_node"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(node, median)| format!("{node} {:.0}", super::f(median)))
        .collect();
    format!(
        "median {:.0}, p90 {:.0} (median by node: {})",
        super::f(&gaps["median"]),
        super::f(&gaps["p90"]),
        by_node.join(", ")
    )
}

/// `node_a 3.1, postgres 1.2, nats 0.2 (busy 74 %)`.
fn cpu_line(cpu: &Value) -> String {
    let Some(map) = cpu.as_object() else {
        return "-".into();
    };
    let parts: Vec<String> = map
        .iter()
        .filter(|(k, _)| *k != "busy")
        .map(|(k, v)| format!("{k} {:.1}", super::f(v)))
        .collect();
    format!(
        "{} (busy {:.0} %)",
        parts.join(", "),
        super::f(&cpu["busy"]) * 100.0
    )
}
