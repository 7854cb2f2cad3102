//! The operator's side of a served team, as the served benchmarks drive it over REST: log in,
//! find the base task, read, send.

use super::serve::PASSWORD;
use serde_json::{Value, json};
use std::net::SocketAddr;

/// A logged-in client of a served team: its token and the base task's id.
pub struct Client {
    pub http: reqwest::Client,
    pub addr: SocketAddr,
    pub token: String,
    /// The base task's id.
    pub base: String,
}

impl Client {
    /// Logs the operator in (password `PASSWORD`) and finds the base task.
    pub async fn login(addr: SocketAddr) -> Result<Client, String> {
        let http = reqwest::Client::new();
        let r: Value = http
            .post(format!("http://{addr}/api/bind_human_agent"))
            .json(&json!({"human_agent_id": "operator", "password": PASSWORD}))
            .send()
            .await
            .map_err(|e| e.to_string())?
            .json()
            .await
            .map_err(|e| e.to_string())?;
        let token = r["token"].as_str().ok_or(format!("login: {r}"))?.to_owned();
        let mut c = Client {
            http,
            addr,
            token,
            base: String::new(),
        };
        let tasks = c.get("/api/states?type=task").await?.1;
        c.base = tasks
            .as_object()
            .and_then(|t| t.values().find(|t| t["task_name"] == "MAS base task"))
            .and_then(|t| t["task_id"].as_str())
            .ok_or(format!("no base task in {tasks}"))?
            .to_owned();
        Ok(c)
    }

    /// `GET path`: the status, the body as JSON (null if it is none) and its size.
    pub async fn get(&self, path: &str) -> Result<(u16, Value, usize), String> {
        let r = self
            .http
            .get(format!("http://{}{path}", self.addr))
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status().as_u16();
        let body = r.bytes().await.map_err(|e| e.to_string())?;
        Ok((
            status,
            serde_json::from_slice(&body).unwrap_or_default(),
            body.len(),
        ))
    }

    /// Sends `content` to `to` in the base task; the answer's status.
    pub async fn send(&self, to: &str, content: String) -> u16 {
        self.http
            .post(format!("http://{}/api/send_message", self.addr))
            .bearer_auth(&self.token)
            .json(&json!({"human_agent_id": "operator", "task_id": self.base,
                "receiver": [to], "content": content, "need_reply": false}))
            .send()
            .await
            .map_or(0, |r| r.status().as_u16())
    }
}
