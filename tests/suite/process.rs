//! What the `cohort` process sets for itself on the machine it runs on: its heap kept off
//! transparent huge pages (a wide goal spent half its CPU zeroing 2 MiB pages faulted in again).

use crate::support::scratch::Scratch;
use crate::support::served::Served;

#[tokio::test]
async fn a_served_team_keeps_its_heap_off_transparent_huge_pages() {
    let dir = Scratch::new("process-thp");
    let data = dir.join("team.db").display().to_string();
    let args = ["--team", "examples/operator/team.yaml", "--data", &data];
    let cwd = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let served = Served::start(cwd, &args, dir.join("serve.log"));
    served
        .login(&reqwest::Client::new(), ("operator", "cohort-demo"))
        .await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", served.child.id())).unwrap();
    let thp = status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .unwrap_or_else(|| panic!("no THP_enabled line in /proc/PID/status:\n{status}"));
    assert_eq!(
        thp.trim(),
        "0",
        "the served process may still take huge pages"
    );
}
