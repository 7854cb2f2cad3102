//! The HTTP server under hostile load, against a child `cohort serve` (this binary), so the
//! memory and file descriptors measured are the server's own:
//!
//! - `load_connections`: 300 connections (silent, half-sent heads, keep-alive after one
//!   request) against a server under `ulimit -n 256`: how many the server closes and when, a
//!   login's latency while they are open, the server's open file descriptors at most.
//! - `load_logins`: 120 parallel wrong logins from 4 addresses (127.0.0.2–5): the server's
//!   memory growth, and the latency of a real login from a fifth address meanwhile.

use super::scenarios::Figures;
use super::serve::PASSWORD;
use super::team::{Scratch, TeamShape, write_team};
use super::{BenchOptions, Job, Row, f, in_child, row};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The selected `load_*` scenarios of this file, each in its child process; rows into `out`.
pub(super) fn rows<N>(
    exe: &Path,
    opts: &BenchOptions,
    wanted: &dyn Fn(&str) -> bool,
    note: &mut N,
    out: &mut Vec<Row>,
) where
    N: FnMut(&str, Result<Value, String>) -> Option<Value>,
{
    if wanted("load_connections") {
        let job = Job::LoadConnections {
            connections: 300,
            open_files: 256,
            quick: opts.quick,
        };
        eprintln!(
            "bench: 300 idle and half-sent connections against `cohort serve` (ulimit -n 256) …"
        );
        if let Some(v) = note("load_connections", in_child(exe, &job)) {
            connection_rows(&v, out);
        }
    }
    if wanted("load_logins") {
        let job = Job::LoadLogins {
            logins: 120,
            addresses: 4,
        };
        eprintln!("bench: 120 parallel wrong logins from 4 addresses against `cohort serve` …");
        if let Some(v) = note("load_logins", in_child(exe, &job)) {
            out.push(row(
                "load_logins",
                format!(
                    "{} wrong logins at once from {} addresses: server RSS before → peak",
                    v["logins"], v["addresses"]
                ),
                format!(
                    "{:.0} → {:.0} MiB ({:+.0} MiB); answered {} × 401, {} × 429",
                    f(&v["rss_before_mib"]),
                    f(&v["rss_peak_mib"]),
                    f(&v["rss_peak_mib"]) - f(&v["rss_before_mib"]),
                    v["answered_401"],
                    v["answered_429"]
                ),
                "≤ +128 MB",
            ));
            out.push(row(
                "load_logins",
                "meanwhile a real login from a fifth address: latency (status)",
                format!(
                    "{:.0} ms ({})",
                    f(&v["real_login_ms"]),
                    v["real_login_status"]
                ),
                "≤ 1 s, 200",
            ));
        }
    }
}

fn connection_rows(v: &Value, out: &mut Vec<Row>) {
    let timeouts = format!(
        "header timeout {} s, idle timeout {} s",
        v["header_timeout_s"], v["idle_timeout_s"]
    );
    out.push(row(
        "load_connections",
        format!(
            "{} connections ({} silent or half-sent, {} keep-alive), server at ulimit -n {} ({timeouts}): closed by the server",
            v["connections"], v["idle"], v["kept"], v["open_files"]
        ),
        format!(
            "{} / {} idle within header timeout + 2 s; {} / {} keep-alive within {} s; {} refused at connect",
            v["idle_closed_in_time"],
            v["idle"],
            v["kept_closed"],
            v["kept"],
            v["wait_s"],
            v["connect_failed"]
        ),
        "all closed",
    ));
    let ms: Vec<String> = v["login_ms"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|m| format!("{:.0}", f(m)))
        .collect();
    out.push(row(
        "load_connections",
        "logins while they are open: latency each (all 200?); server's open fds at most",
        format!(
            "{} ms ({}); {} fds",
            ms.join(", "),
            if v["logins_ok"] == true {
                "all 200"
            } else {
                "NOT all 200"
            },
            v["max_server_fds"]
        ),
        "≤ 1 s each; fds < ulimit",
    ));
}

/// A `cohort serve` child on 127.0.0.1:0, killed when dropped.
pub(super) struct ServeChild {
    pub(super) child: std::process::Child,
    pub(super) addr: SocketAddr,
}

impl ServeChild {
    /// Starts `exe serve` on `team` (keeping its state in `data`, or none), its open-file
    /// limit set to `open_files` when given; waits (at most 60 s) for the address it serves on.
    pub(super) fn start(
        exe: &Path,
        team: &Path,
        open_files: Option<u64>,
        data: Option<&Path>,
    ) -> Result<ServeChild, String> {
        let mut cmd = std::process::Command::new(exe);
        cmd.args(["serve", "--bind", "127.0.0.1:0", "--team"])
            .arg(team);
        match data {
            Some(file) => cmd.arg("--data").arg(file),
            None => cmd.arg("--no-data"),
        };
        cmd.stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(n) = open_files {
            use std::os::unix::process::CommandExt;
            // SAFETY: only setrlimit (async-signal-safe) runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || set_open_files(n, n));
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = std::sync::mpsc::channel();
        // Reads the server's stderr to its end (a full pipe would block it), passing on the
        // address it serves on.
        std::thread::spawn(move || {
            // The last lines it wrote, to say why if it ends before serving.
            let mut last = std::collections::VecDeque::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(addr) = line
                    .split_once(" on http://")
                    .and_then(|(_, rest)| rest.split_whitespace().next())
                    .and_then(|a| a.parse::<SocketAddr>().ok())
                {
                    let _ = tx.send(Ok(addr));
                }
                last.push_back(line);
                if last.len() > 10 {
                    last.pop_front();
                }
            }
            let _ = tx.send(Err(Vec::from(last).join("\n")));
        });
        let why = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(Ok(addr)) => return Ok(ServeChild { child, addr }),
            Ok(Err(said)) => format!("`cohort serve` ended before serving: {said}"),
            Err(_) => "`cohort serve` did not say where it serves within 60 s".to_owned(),
        };
        let _ = child.kill();
        let _ = child.wait();
        Err(why)
    }

    /// A `/proc/<pid>/status` figure in MiB (`VmRSS:`, `VmHWM:`).
    pub(super) fn status_mib(&self, field: &str) -> f64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .unwrap_or_default();
        status
            .lines()
            .find(|l| l.starts_with(field))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| kb / 1024.0)
    }

    fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.child.id())).map_or(0, |d| d.count())
    }
}

impl Drop for ServeChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sets this process's open-file limit (soft, hard).
fn set_open_files(soft: u64, hard: u64) -> std::io::Result<()> {
    let rl = libc::rlimit {
        rlim_cur: soft,
        rlim_max: hard,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives on this stack frame.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &rl) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Raises this process's soft open-file limit to `want` (within its hard limit): the clients
/// hold hundreds of sockets.
fn raise_own_open_files(want: u64) -> Result<(), String> {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given, which lives on this stack frame.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) } != 0 || rl.rlim_cur >= want {
        return Ok(());
    }
    if rl.rlim_max < want {
        return Err(format!(
            "the bench needs {want} open files and may have only {}",
            rl.rlim_max
        ));
    }
    set_open_files(want, rl.rlim_max).map_err(|e| e.to_string())
}

/// The bench team with an operator, and `extra` appended to its team file.
/// A bench team with more keys (`http_keys`, indented YAML lines) in its `http:` block, which
/// `write_team` ends the file with.
fn team(name: &str, http_keys: &str) -> Result<(Scratch, std::path::PathBuf), String> {
    let scratch = Scratch::new(name).map_err(|e| e.to_string())?;
    let hash = crate::auth::hash_password(PASSWORD)?;
    let shape = TeamShape {
        workers: 1,
        steps: 1,
        delay_ms: 0,
        max_in_flight: 64,
        goals: 1,
    };
    let file = write_team(&scratch.0, shape, Some(&hash)).map_err(|e| e.to_string())?;
    if !http_keys.is_empty() {
        let mut text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
        text.push_str(http_keys);
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
    }
    Ok((scratch, file))
}

pub(super) fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
}

/// One login over a fresh connection (from `from` when given): its status and milliseconds.
pub(super) async fn login(
    addr: SocketAddr,
    from: Option<IpAddr>,
    id: &str,
    password: &str,
) -> (u16, f64) {
    let started = Instant::now();
    let client = reqwest::Client::builder()
        .local_address(from)
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(30))
        .build();
    let status = match client {
        Ok(c) => c
            .post(format!("http://{addr}/api/bind_human_agent"))
            .json(&json!({"human_agent_id": id, "password": password}))
            .send()
            .await
            .map_or(0, |r| r.status().as_u16()),
        Err(_) => 0,
    };
    (status, started.elapsed().as_secs_f64() * 1000.0)
}

/// What one crowd connection does before it waits.
#[derive(Clone, Copy, PartialEq)]
enum Visitor {
    Silent,
    HalfSent,
    KeptAlive,
}

/// Opens one crowd connection; None if it cannot even connect.
async fn visit(addr: SocketAddr, how: Visitor) -> Option<TcpStream> {
    let mut tcp = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .ok()?
        .ok()?;
    match how {
        Visitor::Silent => {}
        Visitor::HalfSent => {
            tcp.write_all(b"POST /api/bind_human_agent HTTP/1.1\r\nhost: bench\r\n")
                .await
                .ok()?;
        }
        Visitor::KeptAlive => {
            tcp.write_all(b"GET /api/no-such-route HTTP/1.1\r\nhost: bench\r\n\r\n")
                .await
                .ok()?;
            let mut buf = [0u8; 4096];
            tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
                .await
                .ok()?
                .ok()?;
        }
    }
    Some(tcp)
}

/// Seconds from `t0` until the server closes `tcp`, if within `until`.
async fn closed_at(mut tcp: TcpStream, t0: Instant, until: Instant) -> Option<f64> {
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at(until.into(), tcp.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0) | Err(_)) => return Some(t0.elapsed().as_secs_f64()),
            Ok(Ok(_)) => {}
        }
    }
}

/// One crowd connection's watcher: how it was opened, and when (if) the server closed it.
type Watcher = (Visitor, tokio::task::JoinHandle<Option<f64>>);

/// Opens `n` crowd connections (the last `kept` keep-alive after one request, the rest
/// alternately silent and half-sent), each watched until `until`; and how many could not
/// connect.
async fn crowd(
    addr: SocketAddr,
    n: usize,
    kept: usize,
    t0: Instant,
    until: Instant,
) -> (Vec<Watcher>, usize) {
    let (mut watchers, mut failed) = (Vec::new(), 0);
    for i in 0..n {
        let how = match i {
            i if i >= n - kept => Visitor::KeptAlive,
            i if i % 2 == 0 => Visitor::Silent,
            _ => Visitor::HalfSent,
        };
        match visit(addr, how).await {
            Some(tcp) => watchers.push((how, tokio::spawn(closed_at(tcp, t0, until)))),
            None => failed += 1,
        }
    }
    (watchers, failed)
}

/// The most file descriptors process `pid` holds, sampled every 100 ms until aborted.
fn sample_fds(pid: u32) -> (tokio::task::JoinHandle<()>, Arc<AtomicUsize>) {
    let most = Arc::new(AtomicUsize::new(0));
    let seen = most.clone();
    let task = tokio::spawn(async move {
        loop {
            let n = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
            seen.fetch_max(n, Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    (task, most)
}

/// `connections` connections against a server under `ulimit -n open_files`: the last 20
/// keep-alive after one request, the rest alternately silent and half-sent; five logins
/// while they are open. Quick: short timeouts (2 s, 4 s) instead of the defaults (10 s, 60 s).
pub fn connections(connections: usize, open_files: u64, quick: bool) -> Figures {
    let (header, idle) = if quick { (2, 4) } else { (10, 60) };
    let extra = if quick {
        format!("  header_timeout_s: {header}\n  idle_timeout_s: {idle}\n")
    } else {
        String::new()
    };
    let (_scratch, file) = team("load-connections", &extra)?;
    raise_own_open_files(connections as u64 + 256)?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let server = ServeChild::start(&exe, &file, Some(open_files), None)?;
    let kept = 20.min(connections);
    let wait = Duration::from_secs(idle + 10);
    runtime()?.block_on(async {
        let addr = server.addr;
        let (sampler, max_fds) = sample_fds(server.child.id());
        let t0 = Instant::now();
        let (watchers, connect_failed) = crowd(addr, connections, kept, t0, t0 + wait).await;
        let opened_s = t0.elapsed().as_secs_f64();
        let mut login_ms = Vec::new();
        let mut logins_ok = true;
        for _ in 0..5 {
            let (status, ms) = login(addr, None, "operator", PASSWORD).await;
            logins_ok &= status == 200;
            login_ms.push(ms);
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Each head's clock started when it connected: by `opened_s` at the latest.
        let in_time = opened_s + header as f64 + 2.0;
        let (mut idle_n, mut idle_in_time, mut kept_closed) = (0, 0, 0);
        for (how, w) in watchers {
            let closed = w.await.map_err(|e| e.to_string())?;
            if how == Visitor::KeptAlive {
                kept_closed += usize::from(closed.is_some());
            } else {
                idle_n += 1;
                idle_in_time += usize::from(closed.is_some_and(|s| s <= in_time));
            }
        }
        sampler.abort();
        Ok(json!({
            "connections": connections,
            "open_files": open_files,
            "header_timeout_s": header,
            "idle_timeout_s": idle,
            "wait_s": wait.as_secs(),
            "idle": idle_n,
            "kept": kept,
            "connect_failed": connect_failed,
            "opened_in_s": opened_s,
            "idle_closed_in_time": idle_in_time,
            "kept_closed": kept_closed,
            "login_ms": login_ms,
            "logins_ok": logins_ok,
            "max_server_fds": max_fds.load(Ordering::Relaxed).max(server.open_fds()),
        }))
    })
}

/// `logins` wrong logins at once, spread over `addresses` client addresses (127.0.0.2 on),
/// each for its own id (so the back-off, counted per id and address, lets them all reach
/// the password check), and a real login from the next address right after they start.
pub fn logins(logins: usize, addresses: usize) -> Figures {
    let (_scratch, file) = team("load-logins", "")?;
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let server = ServeChild::start(&exe, &file, None, None)?;
    let address = |i: usize| IpAddr::from([127, 0, 0, 2 + (i % 250) as u8]);
    runtime()?.block_on(async {
        let addr = server.addr;
        // Settled after start-up (and a first login, so its one-off allocations are made).
        login(addr, Some(address(addresses)), "operator", PASSWORD).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let rss_before = server.status_mib("VmRSS:");
        let crowd: Vec<_> = (0..logins)
            .map(|i| {
                let from = address(i % addresses);
                tokio::spawn(
                    async move { login(addr, Some(from), &format!("user{i}"), "wrong").await },
                )
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let (real_status, real_ms) =
            login(addr, Some(address(addresses)), "operator", PASSWORD).await;
        let (mut answered_401, mut answered_429, mut other) = (0, 0, 0);
        for t in crowd {
            match t.await.map_err(|e| e.to_string())?.0 {
                401 => answered_401 += 1,
                429 => answered_429 += 1,
                _ => other += 1,
            }
        }
        Ok(json!({
            "logins": logins,
            "addresses": addresses,
            "rss_before_mib": rss_before,
            "rss_peak_mib": server.status_mib("VmHWM:"),
            "rss_after_mib": server.status_mib("VmRSS:"),
            "real_login_ms": real_ms,
            "real_login_status": real_status,
            "answered_401": answered_401,
            "answered_429": answered_429,
            "answered_other": other,
        }))
    })
}
