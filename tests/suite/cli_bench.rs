//! `cohort bench` as a user runs it (quick sizes, without the autogen-core download): every
//! selected scenario runs in its child process and lands in the table.

use std::process::Command;

#[test]
fn the_quick_bench_runs_its_scenarios_and_prints_a_table() {
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args([
            "bench",
            "--quick",
            "--no-autogen",
            "--only",
            "step_overhead,workers,messages,goals,store,load_connections,load_logins,prompt_cache,nodes",
        ])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{table}\n{log}");
    for want in [
        "| step_overhead | history 20: p50 / p99 |",
        "| workers | N=100: time, peak RSS, steps (Finished) |",
        "| messages | waiting round trips, 2000 in a row |",
        "| goals | 200 goals: ms per goal, first 100 → last 100 |",
        "| step_overhead | history 20, with the SQLite store: p50 / p99 |",
        "| store | 20000 events, 8 a publish, SQLite (WAL, synchronous=FULL) |",
        "| load_connections | 300 connections (280 silent or half-sent, 20 keep-alive), server at ulimit -n 256",
        "| load_logins | 120 wrong logins at once from 4 addresses: server RSS before → peak |",
        "| prompt_cache quickstart | tokens a call | ",
        "calls, Finished) |",
        "| prompt_cache stage20 | new tokens of a following call, by part | history ",
        "| prompt_cache quickstart_zh | tokens a call | ",
        "| prompt_cache quickstart_zh | system message tokens a call | ",
        "| nodes | 1 goals each way, 200 ms a reply: ms a goal | Postgres ",
        "| nodes | 3 nodes, lease 2 s: the team served again after | kill -9: ",
    ] {
        assert!(table.contains(want), "missing {want:?} in:\n{table}");
    }
    assert!(!table.contains("| error |"), "{table}");
    assert!(!table.contains("NOT all committed"), "{table}");
    assert!(!table.contains("NOT all 200"), "{table}");
}

/// The memory flood measures what it says only when the server takes every message: a limit
/// that refuses most of them (as the goal limit did, unnoticed, with the figure taken from 4
/// messages of 2,000) leaves a figure of nothing.
#[test]
fn the_memory_floods_messages_are_all_taken() {
    let job =
        r#"{"scenario": "load_memory", "messages": 40, "chars": 16384, "readers": 4, "feeds": 1}"#;
    let out = Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(["bench", "--child", job])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{said}");
    let figures: serde_json::Value = said
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no figures in {said}"));
    assert_eq!(figures["accepted"], 40, "{figures}");
    assert_eq!(figures["failed"], 0, "{figures}");
}
