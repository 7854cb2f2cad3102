//! A throwaway Postgres cluster for tests: `initdb` into a fresh folder, `pg_ctl start` on a
//! free port, stopped and removed when dropped. Uses Debian's `postgresql` package (installed
//! by `.ci/run`); as root, the server runs as the `postgres` user (it refuses to run as root).
//! Include with `#[path = "support/postgres.rs"] mod postgres;`.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
}

impl Cluster {
    /// Starts a cluster; panics with what to install when Postgres is missing.
    pub fn start(name: &str) -> Cluster {
        let bin = pg_bin().expect(
            "Postgres is not installed: these tests need Debian's `postgresql` package \
             (`apt-get install postgresql`; .ci/run installs it)",
        );
        let dir = std::env::temp_dir().join(format!(
            "cohort-pg-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = Cluster { dir, bin, port };
        c.run(
            "initdb",
            &[
                "-D",
                c.dir.to_str().unwrap(),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-sync",
            ],
        );
        c.start_server();
        c
    }

    fn start_server(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log");
        self.run(
            "pg_ctl",
            &[
                "-D",
                self.dir.to_str().unwrap(),
                "-o",
                &opts,
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "start",
            ],
        );
    }

    /// Stops the server as a crash would (`-m immediate`), waits `down`, and starts it again on
    /// the same port and data.
    pub fn restart(&self, down: std::time::Duration) {
        let dir = self.dir.to_str().unwrap().to_owned();
        self.run("pg_ctl", &["-D", &dir, "-m", "immediate", "-w", "stop"]);
        std::thread::sleep(down);
        self.start_server();
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// Runs a Postgres program, as the `postgres` user when we are root.
    fn run(&self, program: &str, args: &[&str]) {
        let exe = self.bin.join(program);
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&exe);
            c
        } else {
            Command::new(&exe)
        };
        let out = cmd.args(args).output().expect("run a Postgres program");
        assert!(
            out.status.success(),
            "{program} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let exe = self.bin.join("pg_ctl");
        let dir = self.dir.to_str().unwrap().to_owned();
        let args = ["-D", dir.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&exe)
                .args(args)
                .output()
        } else {
            Command::new(&exe).args(args).output()
        };
        let _ = std::fs::remove_dir_all(&self.dir);
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
    versions.pop().or_else(|| {
        std::env::var_os("PATH")
            .and_then(|p| std::env::split_paths(&p).find(|d| Path::new(d).join("initdb").is_file()))
    })
}
