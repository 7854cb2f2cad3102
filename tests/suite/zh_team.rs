//! A Chinese team runs in Chinese end to end: the zh quickstart (`examples/quickstart_zh`) run
//! with `cohort run`, every prompt its model was sent read back from the record, and no English
//! word the runtime wrote found in them: only ids, code, JSON keys, tags and the SPEC's names
//! (skills, states, fields) may be ASCII. The notices the manager acts on, the titles of the
//! steps the runtime adds and the run's closing line read as Chinese.

use crate::support::scratch::Scratch;
use std::collections::BTreeMap;
use std::process::Command;

fn cohort(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cohort"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// ASCII words a Chinese prompt may hold outside code, tags and JSON: names of the product
/// and the formats it speaks, the English terms the zh prompts gloss (`阶段（Stage）`), and
/// the one-letter remains of escapes and memory keys (`\n`, `20250613T103022`).
const ALLOWED: &[&str] = &[
    "Cohort",
    "LLM",
    "MCP",
    "JSON",
    "Markdown",
    "API",
    "POST",
    "Task",
    "Stage",
    "Step",
    "TaskState",
    "SyncState",
    "id",
    "skill",
    "tool",
    "true",
    "false",
    "n",
    "T",
];

/// Whether `word` is a name rather than English prose: an identifier (`task_id`), a skill or
/// a state of the SPEC, an agent of the team, or an allowed word.
fn is_a_name(word: &str, names: &[String]) -> bool {
    word.contains('_') || ALLOWED.contains(&word) || names.iter().any(|n| n == word)
}

/// The SPEC's names a prompt shows as they are: skills, states, and the team's agent ids.
fn names() -> Vec<String> {
    let mut out: Vec<String> = cohort::state::Skill::ALL
        .iter()
        .map(|s| s.name().to_owned())
        .collect();
    for s in [
        "init",
        "running",
        "finished",
        "failed",
        "cancelled",
        "pending",
        "skipped",
        "manager",
        "writer",
        "reviewer",
        "operator",
        "select",
        "text",
        "mode",
        "options",
        "multiple",
        "add",
        "delete",
        "receiver",
        "message",
        "ask",
        "need",
        "reply",
        "action",
        "executor",
        "key",
        "waiting",
    ] {
        out.push(s.to_owned());
    }
    out
}

/// Every English word of `text` outside code spans, tags, JSON, ids and URLs, with its line.
fn english_words(text: &str, names: &[String]) -> Vec<(String, String)> {
    let code = regex::Regex::new(
        r"`[^`]*`|</?[a-z_]+>|\{[^{}]*\}|\\n|[0-9a-f]{8}-[0-9a-f-]{27}|[a-z]+://\S*",
    )
    .unwrap();
    let word = regex::Regex::new(r"[A-Za-z][A-Za-z_]*").unwrap();
    let mut found = Vec::new();
    for line in text.lines() {
        // JSON nests: strip innermost objects until none is left.
        let mut bare = line.to_owned();
        loop {
            let next = code.replace_all(&bare, " ").into_owned();
            if next == bare {
                break;
            }
            bare = next;
        }
        for w in word.find_iter(&bare).map(|m| m.as_str()) {
            if !is_a_name(w, names) {
                found.push((w.to_owned(), line.chars().take(140).collect()));
            }
        }
    }
    found
}

#[test]
fn a_chinese_quickstart_sends_its_model_no_english_the_runtime_wrote() {
    let dir = Scratch::new("zh-quickstart");
    let db = dir.join("run.sqlite").display().to_string();
    let team = "examples/quickstart_zh/team.yaml";
    let run = cohort(&[
        "run",
        "--team",
        team,
        "--goal",
        "写一首关于秋雨的俳句",
        "--data",
        &db,
    ]);
    let said = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{said}");
    // The steps the runtime titled read as Chinese in the run's progress lines.
    assert!(said.contains("处理通知：任务“秋雨俳句”已创建"), "{said}");
    assert!(said.contains("为我在本阶段的目标规划步骤"), "{said}");
    // And so does how the run ended.
    assert!(said.contains("任务已完成 （20 个步骤，"), "{said}");

    let export = cohort(&["export", "--data", &db]);
    let calls: Vec<serde_json::Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|l| l.get("model_call").cloned())
        .collect();
    assert_eq!(calls.len(), 20, "every model call is recorded");
    let names = names();
    let mut english: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for call in &calls {
        for part in ["system", "prompt"] {
            let text = call[part].as_str().unwrap_or_default();
            for (w, line) in english_words(text, &names) {
                english.entry(w).or_insert((0, line)).0 += 1;
            }
        }
    }
    assert!(
        english.is_empty(),
        "English words in the prompts of a zh team (word: count, first line):\n{}",
        english
            .iter()
            .map(|(w, (n, l))| format!("{w}: {n} | {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The notices the manager acted on are Chinese, facts and all.
    let manager: String = calls
        .iter()
        .filter(|c| c["agent_id"] == "manager")
        .filter_map(|c| c["prompt"].as_str())
        .collect();
    for notice in [
        "已创建，由你担任管理者",
        "每个智能体都已提交完成总结",
        "已没有待运行的阶段",
    ] {
        assert!(manager.contains(notice), "no notice saying {notice:?}");
    }

    // The run replays from its record, and the replay's report is Chinese too.
    let replay = cohort(&["replay", "--team", team, "--data", &db]);
    let said = String::from_utf8_lossy(&replay.stderr);
    assert_eq!(replay.status.code(), Some(0), "{said}");
    assert!(said.contains("结束时的状态也相同"), "{said}");
    let english = english_words(&said, &names);
    assert!(
        english.is_empty(),
        "English in the replay's report: {english:?}"
    );
}

#[test]
fn the_scan_finds_an_english_sentence_and_passes_names_code_and_json() {
    let names = names();
    let found = english_words("你在本阶段的目标：Plan the steps", &names);
    assert_eq!(
        found.iter().map(|(w, _)| w.as_str()).collect::<Vec<_>>(),
        ["Plan", "the", "steps"]
    );
    let clean = "- task_id: 16897569-8290-4426-8cde-035a5821114d\n\
                 - execute_result: {\"think\":\"草稿：\\n雨 {\\\"a\\\": 1}\"}\n\
                 用 `add_task` 和 <planned_step> 给 writer 发消息（reflection, finished）";
    assert!(
        english_words(clean, &names).is_empty(),
        "{:?}",
        english_words(clean, &names)
    );
}
