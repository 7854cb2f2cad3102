//! Files a person attaches (seeds 001 §1, 003 §2.1, 004 V1 §5), as a user meets them: the real
//! `cohort serve` on a SQLite store runs the attachments team (tests/fixtures/attachments); the
//! operator uploads `sales.csv` over REST and gives a goal with it; the task lists the file,
//! the analyst's stage start names it, and the analyst reads it by id through the bundled
//! workspace server (a child process reading the team's store), which also saves it in the
//! workspace. Uploads that are too large, of a type a browser would run, not what their type
//! says, or from nobody logged in are refused with the reason; a message naming a file the
//! store lacks is refused; the file survives a restart of the server.

use crate::support::scratch;

use crate::support::served::Served;
use cohort::attachment::{AttachmentId, MOST_ATTACHMENT_BYTES};
use scratch::Scratch;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const FIXTURE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/attachments");

/// The fixture team copied into `dir` (its workspace is made there).
fn team_in(dir: &Path) {
    std::fs::create_dir_all(dir.join("servers")).unwrap();
    for f in ["team.yaml", "script.yaml", "servers/workspace.yaml"] {
        std::fs::copy(Path::new(FIXTURE).join(f), dir.join(f)).unwrap();
    }
}

fn start(dir: &Path, log: &str) -> Served {
    let args = ["--team", "team.yaml", "--data", "team.db"];
    Served::start(dir, &args, dir.join(log))
}

async fn login(http: &reqwest::Client, s: &Served) -> String {
    s.login(http, ("operator", "cohort-demo")).await
}

/// Uploads `bytes` as `name` of type `mime`: the status and the answer.
async fn upload(
    http: &reqwest::Client,
    s: &Served,
    token: Option<&str>,
    (name, mime): (&str, &str),
    bytes: Vec<u8>,
) -> (u16, Value) {
    let mut req = http
        .post(format!("{}/api/attachments", s.base))
        .query(&[("name", name)])
        .header("content-type", mime)
        .body(bytes);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn states(http: &reqwest::Client, s: &Served, token: &str, kind: &str) -> Value {
    s.get(http, token, &format!("/api/states?type={kind}"))
        .await
}

async fn send(http: &reqwest::Client, s: &Served, token: &str, files: &[&str]) -> (u16, Value) {
    let tasks = states(http, s, token, "task").await;
    let base = tasks
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, t)| t["task_name"] == "MAS base task")
        .map(|(id, _)| id.clone())
        .expect("the base task");
    let r = http
        .post(format!("{}/api/send_message", s.base))
        .bearer_auth(token)
        .json(
            &json!({"human_agent_id": "operator", "task_id": base, "receiver": ["manager"],
            "content": "GOAL# sum up the attached sales", "need_reply": false,
            "attachments": files}),
        )
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn refused(got: &(u16, Value), status: u16, says: &str) {
    assert_eq!(got.0, status, "{:?}", got.1);
    let error = got.1["error"].as_str().unwrap_or_default();
    assert!(error.contains(says), "`{error}` should say `{says}`");
}

/// Waits until `what` of the states of `kind` holds.
async fn until(
    (http, s, token): (&reqwest::Client, &Served, &str),
    kind: &str,
    what: &str,
    holds: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let all = states(http, s, token, kind).await;
        if let Some(found) = all.as_object().unwrap().values().find(|v| holds(v)) {
            return found.clone();
        }
        assert!(Instant::now() < deadline, "{what}: {all:#}\n{}", s.said());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_file_attached_to_a_goal_is_listed_on_its_task_and_read_by_the_agent() {
    let dir = Scratch::new("attachments");
    team_in(&dir);
    let http = reqwest::Client::new();
    let s = start(&dir, "serve.log");
    let token = login(&http, &s).await;
    let csv = std::fs::read(Path::new(FIXTURE).join("sales.csv")).unwrap();

    // What is not taken, and why.
    let t = Some(token.as_str());
    refused(
        &upload(&http, &s, None, ("a.txt", "text/plain"), b"x".to_vec()).await,
        401,
        "Bearer",
    );
    refused(
        &upload(
            &http,
            &s,
            t,
            ("page.html", "text/html"),
            b"<script>".to_vec(),
        )
        .await,
        415,
        "text/csv",
    );
    refused(
        &upload(
            &http,
            &s,
            t,
            ("pic.png", "image/png"),
            b"not a png".to_vec(),
        )
        .await,
        422,
        "signature",
    );
    let big = vec![b'a'; MOST_ATTACHMENT_BYTES + 1];
    refused(
        &upload(&http, &s, t, ("big.txt", "text/plain"), big).await,
        413,
        "larger than",
    );
    refused(
        &send(&http, &s, &token, &["att-000000000000000000000000"]).await,
        422,
        "upload it first",
    );

    // The file: stored, then named; a browser's generic type is read from the name.
    let (status, body) = upload(
        &http,
        &s,
        t,
        ("sales.csv", "application/octet-stream"),
        csv.clone(),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let file = &body["attachment"];
    let id = AttachmentId::of("sales.csv", &csv);
    assert_eq!(file["id"], id.as_str(), "{body}");
    assert_eq!(file["mime"], "text/csv");
    assert_eq!(file["bytes"], csv.len());

    let (status, body) = send(&http, &s, &token, &[id.as_str()]).await;
    assert_eq!(status, 200, "{body}");
    let ctx = (&http, &s, token.as_str());
    let task = until(ctx, "task", "the goal's task to finish", |t| {
        t["task_name"] == "Sales" && t["execution_state"] == "finished"
    })
    .await;
    assert_eq!(task["attachments"][0]["id"], id.as_str(), "{task:#}");
    assert_eq!(task["attachments"][0]["name"], "sales.csv");

    // The analyst planned from a stage start that named the file, and read it by id.
    let read = until(ctx, "step", "the analyst's read", |st| {
        st["agent_id"] == "analyst" && st["type"] == "tool"
    })
    .await;
    assert_eq!(read["execution_state"], "finished", "{read:#}");
    let result = read["execute_result"].to_string();
    assert!(
        result.contains("north,Q2,140") && result.contains("saved in the workspace"),
        "{result}"
    );
    let saved = std::fs::read(dir.join("workspace/inputs/sales.csv")).unwrap();
    assert_eq!(saved, csv, "saved as it was attached");

    // The file is the store's: after a restart it is given back as it was attached.
    drop(s);
    let s = start(&dir, "again.log");
    let token = login(&http, &s).await;
    let r = http
        .get(format!("{}/api/attachments/{id}", s.base))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/csv");
    assert_eq!(r.headers()["x-content-type-options"], "nosniff");
    assert_eq!(r.bytes().await.unwrap().to_vec(), csv);
}

#[test]
fn cohort_run_gives_its_goal_the_files_attached_and_refuses_what_it_cannot_keep() {
    let dir = Scratch::new("attachments-run");
    team_in(&dir);
    std::fs::copy(Path::new(FIXTURE).join("sales.csv"), dir.join("sales.csv")).unwrap();
    std::fs::write(dir.join("page.html"), "<script>").unwrap();
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
            .current_dir(&*dir)
            .args([
                "run",
                "--team",
                "team.yaml",
                "--goal",
                "GOAL# sum up the sales",
            ])
            .args(["--timeout", "60"])
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, said) = run(&["--attach", "sales.csv"]);
    assert_eq!(code, Some(3), "{said}");
    assert!(said.contains("give --data"), "{said}");
    let (code, said) = run(&["--attach", "page.html", "--data", "team.db"]);
    assert_eq!(code, Some(3), "{said}");
    assert!(said.contains("page.html cannot be attached"), "{said}");

    let (code, said) = run(&["--attach", "sales.csv", "--data", "team.db"]);
    assert_eq!(code, Some(0), "{said}");
    assert_eq!(
        std::fs::read(dir.join("workspace/inputs/sales.csv")).unwrap(),
        std::fs::read(dir.join("sales.csv")).unwrap(),
        "the analyst read the attached file and saved it"
    );
}
