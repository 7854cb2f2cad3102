//! What people read, held to golden text (tests/golden/wording.txt): the notices a person gets
//! (a task ended, failed, was cancelled or stalled; an agent waits for their reply), the titles
//! of the steps that act on a goal or a notice, and spans of time. A change of wording shows
//! as a diff to review; `UPDATE_GOLDEN=1 cargo test --test suite wording::` writes the file anew.

use cohort::ids::{AgentId, StageRef, TaskId};
use cohort::message::Message;
use cohort::notice::{Notice, StageReports};
use cohort::state::{AgentState, ExecutionState, FailedStage, HumanConfig, TaskEnd};
use cohort::step::receive_as_human;

const GOLDEN: &str = "tests/golden/wording.txt";

fn ended(state: ExecutionState, summary: &str, why: Option<TaskEnd>) -> Notice {
    Notice::TaskEnded {
        task_id: TaskId::from("t1"),
        task_name: "Haiku for the operator".into(),
        state,
        summary: summary.into(),
        why: why.map(|w| w.render()),
    }
}

fn notices() -> Vec<(&'static str, Notice)> {
    let failed_stage = TaskEnd {
        why: None,
        failed_stages: vec![FailedStage {
            stage_id: "s1".into(),
            stage_intention: "Write it".into(),
            why: "it was closed with every agent in it failed (writer failed)".into(),
        }],
    };
    let failed = TaskEnd {
        why: Some("no stage of the task finished with a result".into()),
        failed_stages: Vec::new(),
    };
    vec![
        (
            "finished",
            ended(ExecutionState::Finished, "Cold rain on the eaves", None),
        ),
        (
            "finished, a stage gave nothing",
            ended(ExecutionState::Finished, "Half of it", Some(failed_stage)),
        ),
        ("failed", ended(ExecutionState::Failed, "", Some(failed))),
        (
            "cancelled",
            ended(
                ExecutionState::Cancelled,
                "Cancelled by `operator`: not needed",
                None,
            ),
        ),
        (
            "stalled",
            Notice::TaskStalled {
                task_id: "t1".into(),
                task_name: "Haiku for the operator".into(),
                task_manager: "manager".into(),
                idle_secs: 600,
            },
        ),
        (
            "stage complete (headline)",
            Notice::StageComplete {
                task_id: "t1".into(),
                stage: StageReports {
                    stage_id: "s1".into(),
                    stage_intention: "Write it".into(),
                    state: ExecutionState::Running,
                    reports: Vec::new(),
                    unlisted: 0,
                },
            },
        ),
    ]
}

/// What a person's notice says when an agent waits for their reply.
fn waiting_notice() -> String {
    let mut person = AgentState::new(
        "operator".into(),
        "Operator".into(),
        "operator".into(),
        "p".into(),
    );
    person.human_config = Some(HumanConfig {
        display_name: "Operator".into(),
    });
    let mut m = Message::notice(
        "t1".into(),
        AgentId::from("manager"),
        vec!["operator".into()],
        StageRef::NoRelative,
        "Which season?".into(),
    );
    m.need_reply = true;
    m.waiting = Some(vec!["w1".into()]);
    receive_as_human(&mut person, &m, "2026-11-27 10:00:00", 0);
    person.conversation_pool.unwrap().global_messages.join("\n")
}

fn wording() -> String {
    let mut out = String::new();
    for (what, n) in notices() {
        out.push_str(&format!("## {what}\nheadline: {}\n", n.headline()));
        if matches!(n, Notice::TaskEnded { .. } | Notice::TaskStalled { .. }) {
            out.push_str(&format!("{}\n", n.render()));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "## a question waits for the person\n{}\n\n",
        waiting_notice()
    ));
    out.push_str("## spans\n");
    for s in [45, 180, 600, 7_500] {
        out.push_str(&format!("{s} s: {}\n", cohort::clock::span(s)));
    }
    out
}

#[test]
fn what_people_read_keeps_its_wording() {
    let now = wording();
    if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
        std::fs::write(GOLDEN, &now).unwrap();
        return;
    }
    let golden = std::fs::read_to_string(GOLDEN).unwrap_or_default();
    assert_eq!(
        now, golden,
        "the wording people read changed (`UPDATE_GOLDEN=1 cargo test --test suite wording::` rewrites {GOLDEN}; review its diff)"
    );
}
