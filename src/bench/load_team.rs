//! A served team under hostile load, driven as a careless client, a broken model or a failing
//! endpoint would drive it, against child processes of this binary (`cohort serve`, `cohort
//! run`) so the memory measured is the server's own:
//!
//! - `load_memory`: 2,000 messages of 16 KB posted to an agent, a goal every 3 s, websocket
//!   readers that read at once, slowly and never, then 200 concurrent readers of the task list:
//!   the server's RSS at its peak and its growth, the list's latency.
//! - `load_runaway`: a model that answers `add_task` to every step (the tag format, as an
//!   endpoint that ignores the schema): the tasks one goal leaves, and the server's RSS.
//! - `load_outage`: the openai example run against an OpenAI-compatible stub that goes down
//!   (every call HTTP 500) for 20 s a few calls into each run: how many runs finish.

use super::client::Client;
use super::load_http::{ServeChild, runtime};
use super::model_stub::{ModelStub, Outage};
use super::scenarios::Figures;
use super::serve::PASSWORD;
use super::team::Scratch;
use super::{BenchOptions, Job, Row, f, in_child, row};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The openai example, run as a user runs it (its endpoint and model from the environment).
const OPENAI_EXAMPLE: &str = include_str!("../../examples/openai/team.yaml");

/// The selected scenarios of this file, each in its child process; rows into `out`.
pub(super) fn rows<N>(
    exe: &Path,
    opts: &BenchOptions,
    wanted: &dyn Fn(&str) -> bool,
    note: &mut N,
    out: &mut Vec<Row>,
) where
    N: FnMut(&str, Result<Value, String>) -> Option<Value>,
{
    let q = opts.quick;
    if wanted("load_memory") {
        let job = Job::LoadMemory {
            messages: if q { 200 } else { 2_000 },
            chars: 16 * 1024,
            readers: 200,
            feeds: 3,
        };
        eprintln!(
            "bench: 16 KB messages, goals, websocket and task-list readers against `cohort serve` …"
        );
        if let Some(v) = note("load_memory", in_child(exe, &job)) {
            memory_rows(&v, out);
        }
    }
    if wanted("load_runaway") {
        let job = Job::LoadRunaway {
            seconds: if q { 3 } else { 15 },
        };
        eprintln!("bench: a model that answers add_task to everything, against `cohort serve` …");
        if let Some(v) = note("load_runaway", in_child(exe, &job)) {
            out.push(row(
                "load_runaway",
                format!("one goal, {} s later: tasks; server RSS", v["seconds"]),
                format!(
                    "{} task(s) ({}); {:.0} → {:.0} MiB",
                    v["tasks"],
                    v["task_states"],
                    f(&v["rss_start_mib"]),
                    f(&v["rss_end_mib"])
                ),
                "≤ task_limits.tasks_per_goal (8); flat",
            ));
        }
    }
    if wanted("load_outage") {
        let job = Job::LoadOutage {
            runs: if q { 1 } else { 4 },
            down_s: if q { 3 } else { 20 },
        };
        eprintln!("bench: the openai example with its endpoint down for a while in each run …");
        if let Some(v) = note("load_outage", in_child(exe, &job)) {
            out.push(row(
                "load_outage",
                format!(
                    "{} runs of the openai example, endpoint down {} s from its 3rd call: finished; seconds each",
                    v["runs"], v["down_s"]
                ),
                format!("{} of {}; {}", v["finished"], v["runs"], v["seconds"]),
                "all finish once it recovers",
            ));
        }
    }
}

fn memory_rows(v: &Value, out: &mut Vec<Row>) {
    out.push(row(
        "load_memory",
        format!(
            "{} × {} KB messages, a goal every 3 s, {} websocket readers: server RSS start → peak (growth)",
            v["messages"],
            f(&v["chars"]) as u64 / 1024,
            v["feeds"]
        ),
        format!(
            "{:.0} → {:.0} MiB ({:+.0} MiB); {} taken in {:.1} s, {} times told to wait (503) and sent again, {} refused otherwise",
            f(&v["rss_start_mib"]),
            f(&v["rss_peak_mib"]),
            f(&v["rss_peak_mib"]) - f(&v["rss_start_mib"]),
            v["accepted"],
            f(&v["flood_s"]),
            v["refused"],
            v["failed"]
        ),
        "peak ≤ 512 MB, growth ≤ 256 MB",
    ));
    out.push(row(
        "load_memory",
        format!(
            "{} concurrent GET /api/states?type=task: p50 / p95 (statuses)",
            v["readers"]
        ),
        format!(
            "{:.0} ms / {:.0} ms ({}); {} bytes each",
            f(&v["list_p50_ms"]),
            f(&v["list_p95_ms"]),
            v["list_statuses"],
            v["list_bytes"]
        ),
        "p95 ≤ 500 ms",
    ));
}

/// The team of `load_memory` and `load_runaway`: a scripted manager answering as `manager`
/// says, a worker that notes whatever it is told, and the operator.
fn scripted_team(name: &str, manager: &str, more: &str) -> Result<(Scratch, PathBuf), String> {
    let scratch = Scratch::new(name).map_err(|e| e.to_string())?;
    let hash = crate::auth::hash_password(PASSWORD)?;
    let team = format!(
        "name: {name}\nllm: {{provider: scripted, script: script.yaml}}\n{more}\
         agents:\n  - {{id: manager, role: manager, skills: [process_message, decision, task_manager]}}\n  \
         - {{id: worker, role: worker, skills: [planning, think, summary, process_message]}}\n\
         humans:\n  - id: operator\n    role: operator\n    access: operator\n    password_hash: \"{hash}\"\n"
    );
    let script = format!(
        "replies:\n  manager:\n    task_manager:\n{manager}  worker:\n    process_message:\n      - {{when: \"\", text: \"Noted.\"}}\n"
    );
    std::fs::write(scratch.0.join("team.yaml"), team).map_err(|e| e.to_string())?;
    std::fs::write(scratch.0.join("script.yaml"), script).map_err(|e| e.to_string())?;
    let file = scratch.0.join("team.yaml");
    Ok((scratch, file))
}

/// Samples the server's RSS every 50 ms while it runs; the highest seen, in MiB.
fn sample_rss(server: &ServeChild) -> (Arc<AtomicBool>, Arc<AtomicU64>) {
    let (stop, peak) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicU64::new(0)),
    );
    let (s, p, pid) = (stop.clone(), peak.clone(), server.child.id());
    std::thread::spawn(move || {
        while !s.load(Ordering::Relaxed) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let kb = status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
                .unwrap_or(0);
            p.fetch_max(kb, Ordering::Relaxed);
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    (stop, peak)
}

/// Websocket readers of three speeds: `n` that read every frame, `n` that read one a second,
/// `n` that never read.
async fn feeds(c: &Client, n: usize) -> Vec<tokio::task::JoinHandle<()>> {
    use futures::StreamExt;
    let url = format!("ws://{}/ws?token={}", c.addr, c.token);
    let mut readers = Vec::new();
    for i in 0..3 * n {
        let url = url.clone();
        let addr = c.addr;
        readers.push(tokio::spawn(async move {
            if i >= 2 * n {
                // Connected with a small receive buffer, then never reading.
                let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
                    return;
                };
                let _ = socket.set_recv_buffer_size(16 * 1024);
                let Ok(stream) = socket.connect(addr).await else {
                    return;
                };
                let _held = tokio_tungstenite::client_async(&url, stream).await;
                tokio::time::sleep(Duration::from_secs(3600)).await;
                return;
            }
            let Ok((mut ws, _)) = tokio_tungstenite::connect_async(&url).await else {
                return;
            };
            while let Some(Ok(_)) = ws.next().await {
                if i >= n {
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }));
    }
    readers
}

/// `messages` of `chars` characters posted to the worker (8 at a time) while a goal goes to the
/// manager every 3 s and websocket readers of every speed follow; then `readers` concurrent
/// reads of the task list.
pub fn memory(messages: usize, chars: usize, readers: usize, feeds_each: usize) -> Figures {
    let rules = "      - {when: \"GOAL\", text: '<task_instruction>{\"action\": \"add_task\", \"task_name\": \"g\", \"task_intention\": \"Do it.\"}</task_instruction>'}\n      \
                 - {when: \"\", text: '<task_instruction>{\"action\": \"finish_task\", \"task_id\": \"{{task_id}}\", \"task_summary\": \"Done: it is done.\", \"outcome\": \"finished\"}</task_instruction>'}\n";
    // Every message of the flood is a person's message in the base task, which the goal
    // limits (`http.goals_per_person`, 5 in 15 s) would refuse from the sixth on: this
    // scenario measures the memory a flood that is let in takes, so the limits let it in.
    let limits = "http: {goals_per_person: 1000000, running_tasks: 1000000}\n";
    let (scratch, file) = scripted_team("load-memory", rules, limits)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let server = ServeChild::start(&exe, &file, None, Some(&scratch.0.join("team.db")))?;
    runtime()?.block_on(async {
        let c = Arc::new(Client::login(server.addr).await?);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_start = server.status_mib("VmRSS:");
        let (stop, peak) = sample_rss(&server);
        let feeds = feeds(&c, feeds_each).await;
        let goals = {
            let c = c.clone();
            tokio::spawn(async move {
                for n in 0.. {
                    c.send("manager", format!("GOAL {n}: do it.")).await;
                    tokio::time::sleep(Duration::from_secs(3)).await;
                }
            })
        };
        let started = Instant::now();
        let sent = futures::future::join_all((0..8).map(|w| {
            let c = c.clone();
            async move {
                let mut statuses = Vec::new();
                for i in (w..messages).step_by(8) {
                    let head = format!("note {i}: ");
                    let body = format!("{head}{}", "x".repeat(chars.saturating_sub(head.len())));
                    // A client that is told to wait (503, Retry-After: 1) sends again later.
                    for _ in 0..60 {
                        let status = c.send("worker", body.clone()).await;
                        statuses.push(status);
                        if status != 503 {
                            break;
                        }
                        tokio::time::sleep(Duration::from_secs(1)).await;
                    }
                }
                statuses
            }
        }))
        .await;
        let flood_s = started.elapsed().as_secs_f64();
        let statuses: Vec<u16> = sent.into_iter().flatten().collect();
        let (p50, p95, list_statuses, list_bytes) = read_list(&c, readers).await;
        goals.abort();
        for f in feeds {
            f.abort();
        }
        stop.store(true, Ordering::Relaxed);
        Ok(json!({
            "messages": messages, "chars": chars, "readers": readers, "feeds": 3 * feeds_each,
            "rss_start_mib": rss_start,
            "rss_peak_mib": peak.load(Ordering::Relaxed) as f64 / 1024.0,
            "rss_end_mib": server.status_mib("VmRSS:"),
            "flood_s": flood_s,
            "refused": statuses.iter().filter(|s| **s == 503).count(),
            "accepted": statuses.iter().filter(|s| **s == 200).count(),
            "failed": statuses.iter().filter(|s| ![200, 503].contains(*s)).count(),
            "list_p50_ms": p50, "list_p95_ms": p95,
            "list_statuses": list_statuses, "list_bytes": list_bytes,
        }))
    })
}

/// `readers` concurrent reads of the task list: p50 and p95 in ms, the statuses, the bytes.
async fn read_list(c: &Arc<Client>, readers: usize) -> (f64, f64, Value, usize) {
    let reads = futures::future::join_all((0..readers).map(|_| {
        let c = c.clone();
        async move {
            let t = Instant::now();
            let r = c.get("/api/states?type=task").await;
            (t.elapsed().as_secs_f64() * 1000.0, r)
        }
    }))
    .await;
    let mut ms: Vec<f64> = reads.iter().map(|r| r.0).collect();
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| {
        ms.get(((ms.len() as f64 - 1.0) * q) as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let mut statuses = std::collections::BTreeMap::<String, usize>::new();
    let mut bytes = 0;
    for (_, r) in &reads {
        let s = r.as_ref().map_or("error".to_owned(), |r| r.0.to_string());
        *statuses.entry(s).or_default() += 1;
        if let Ok((_, _, n)) = r {
            bytes = bytes.max(*n);
        }
    }
    (at(0.5), at(0.95), json!(statuses), bytes)
}

/// One goal to a manager whose model answers add_task to every step; the tasks there are
/// `seconds` later, and the server's RSS.
pub fn runaway(seconds: u64) -> Figures {
    let rules = "      - {when: \"\", text: '<task_instruction>{\"action\": \"add_task\", \"task_name\": \"more\", \"task_intention\": \"Do more.\"}</task_instruction>'}\n";
    let (_scratch, file) = scripted_team("load-runaway", rules, "")?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let server = ServeChild::start(&exe, &file, None, None)?;
    runtime()?.block_on(async {
        let c = Client::login(server.addr).await?;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_start = server.status_mib("VmRSS:");
        c.send("manager", "Write a haiku about autumn rain".into())
            .await;
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let (_, tasks, _) = c.get("/api/states?type=task").await?;
        let opened: Vec<&Value> = tasks
            .as_object()
            .map(|t| {
                t.values()
                    .filter(|t| t["task_name"] != "MAS base task")
                    .collect()
            })
            .unwrap_or_default();
        let states: Vec<&str> = opened
            .iter()
            .filter_map(|t| t["execution_state"].as_str())
            .collect();
        Ok(json!({
            "seconds": seconds,
            "tasks": opened.len(),
            "task_states": states.join(", "),
            "rss_start_mib": rss_start,
            "rss_end_mib": server.status_mib("VmRSS:"),
        }))
    })
}

/// `runs` runs of the openai example (`cohort run`) against the model stub, each run's endpoint
/// down for `down_s` from its third call: how many finish, and how long each took.
pub fn outage(runs: usize, down_s: u64) -> Figures {
    let scratch = Scratch::new("load-outage").map_err(|e| e.to_string())?;
    let file = scratch.0.join("team.yaml");
    std::fs::write(&file, OPENAI_EXAMPLE).map_err(|e| e.to_string())?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let rt = runtime()?;
    let (mut finished, mut seconds, mut refused) = (0, Vec::new(), 0);
    for run in 0..runs {
        let outage = Outage {
            from: 3,
            lasts: Duration::from_secs(down_s),
        };
        let stub = rt
            .block_on(ModelStub::start(Some(outage)))
            .map_err(|e| e.to_string())?;
        let started = Instant::now();
        let status = std::process::Command::new(&exe)
            .args(["run", "--timeout", "300", "--team"])
            .arg(&file)
            .args(["--goal", &format!("Please reach GOAL<g{run}>.")])
            .env("COHORT_BASE_URL", stub.base_url())
            .env("COHORT_MODEL", "stub")
            .env("OPENAI_API_KEY", "bench")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .map_err(|e| e.to_string())?;
        seconds.push((started.elapsed().as_secs_f64() * 10.0).round() / 10.0);
        finished += usize::from(status.success());
        refused += stub.calls().1;
    }
    Ok(json!({
        "runs": runs, "down_s": down_s, "finished": finished,
        "seconds": seconds, "calls_refused": refused,
    }))
}
