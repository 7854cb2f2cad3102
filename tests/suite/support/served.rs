//! `cohort serve` as a child process, as a user starts it: on a free loopback port, its log in
//! a file, killed when dropped (also when the test panics); and signing in over its REST API.

use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Served {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Where its stderr goes.
    pub log: PathBuf,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// `cohort serve ARGS --bind 127.0.0.1:PORT` in folder `cwd`, its stderr in `log`.
    pub fn start(cwd: &Path, args: &[&str], log: PathBuf) -> Served {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .current_dir(cwd)
            .arg("serve")
            .args(args)
            .arg("--bind")
            .arg(format!("127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Served {
            child,
            base: format!("http://127.0.0.1:{port}"),
            log,
        }
    }

    /// What it logged so far.
    pub fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `GET path` with `token`, its JSON.
    pub async fn get(&self, http: &reqwest::Client, token: &str, path: &str) -> Value {
        http.get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// Signs `who` in once the server answers (within 30 s); the token.
    pub async fn login(&self, http: &reqwest::Client, (who, password): (&str, &str)) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = http
                .post(format!("{}/api/bind_human_agent", self.base))
                .json(&json!({"human_agent_id": who, "password": password}))
                .send()
                .await;
            if let Ok(r) = r {
                let v: Value = r.json().await.unwrap();
                return v["token"].as_str().unwrap().to_owned();
            }
            assert!(Instant::now() < deadline, "no server: {}", self.said());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
