//! What people read, held to golden text in each language (tests/golden/wording.txt for
//! English, wording.zh.txt for Chinese): the notices a person gets (a task ended, failed, was
//! cancelled or stalled; an agent waits for their reply or its wait ran out), the titles of the
//! steps that act on a goal or a notice, what a person is asked to check (a plan, a manager's
//! stages, a HIGH tool call with its risk's reason) and spans of time. A change of wording shows as a diff to review;
//! `UPDATE_GOLDEN=1 cargo test --test suite wording::` writes the files anew.

use cohort::ids::{AgentId, StageRef, TaskId};
use cohort::message::Message;
use cohort::notice::{Notice, StageReports};
use cohort::prompt::{Language, Texts};
use cohort::state::{Agent, AgentState, ExecutionState, FailedStage, HumanConfig, TaskEnd};
use cohort::step::receive_as_human;

/// The golden file of `lang`.
fn golden(lang: Language) -> String {
    match lang {
        Language::En => "tests/golden/wording.txt".into(),
        other => format!("tests/golden/wording.{other}.txt"),
    }
}

fn ended(state: ExecutionState, summary: &str, why: Option<TaskEnd>, t: &Texts) -> Notice {
    Notice::TaskEnded {
        task_id: TaskId::from("t1"),
        task_name: "Haiku for the operator".into(),
        state,
        summary: summary.into(),
        summary_written: None,
        why: why.map(|w| w.render(t)),
    }
}

fn notices(t: &Texts) -> Vec<(&'static str, Notice)> {
    let failed_stage = TaskEnd {
        why: None,
        failed_stages: vec![FailedStage {
            stage_id: "s1".into(),
            stage_intention: "Write it".into(),
            why: t
                .stage_why_all_failed(t.stage_agents(t.stage_agent("writer", "failed")))
                .trim()
                .to_owned(),
        }],
    };
    let failed = TaskEnd {
        why: Some(t.hollow_no_stage()),
        failed_stages: Vec::new(),
    };
    vec![
        (
            "finished",
            ended(ExecutionState::Finished, "Cold rain on the eaves", None, t),
        ),
        (
            "finished, a stage gave nothing",
            ended(
                ExecutionState::Finished,
                "Half of it",
                Some(failed_stage),
                t,
            ),
        ),
        ("failed", ended(ExecutionState::Failed, "", Some(failed), t)),
        (
            "cancelled",
            ended(
                ExecutionState::Cancelled,
                &t.cancelled_by_because("operator", "not needed"),
                None,
                t,
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
fn waiting_notice(texts: &std::sync::Arc<Texts>) -> String {
    let mut person = Agent::from(AgentState::new(
        "operator".into(),
        "Operator".into(),
        "operator".into(),
        "p".into(),
    ));
    person.settings_mut().texts = texts.clone();
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
    (person.into_state().conversation_pool.unwrap())
        .global_messages
        .join("\n")
}

/// What a person is asked to check: a plan of steps, a manager's stages, a HIGH tool call.
fn checks(t: &Texts) -> String {
    use cohort::message::StagePlan;
    use cohort::state::{Executor, PlannedStep, Skill, StepState};
    use cohort::step::approval::{ApprovalRequest, approval_notice, high_risk_warning};
    use cohort::step::plan_check::{PlanCheck, StagesPlan, plan_notice};
    let step = StepState::new(
        "t1".into(),
        StageRef::NoRelative,
        "writer".into(),
        Executor::Skill(Skill::Planning),
        "Write it",
        "",
    );
    let steps = PlanCheck::new(vec![
        PlannedStep::new(Executor::Skill(Skill::Think), "Draft", ""),
        PlannedStep::new(Executor::Skill(Skill::Reflection), "Check it", ""),
    ]);
    let mut stages = PlanCheck::new(Vec::new());
    stages.stages = Some(StagesPlan {
        task_id: "t1".into(),
        stages: vec![StagePlan {
            stage_intention: "Write it".into(),
            agent_allocation: [("writer".into(), "Write a haiku".into())].into(),
        }],
    });
    let risk = cohort::policy::judge("write_file", None, &Default::default(), t);
    let arguments = serde_json::json!({"path": "haiku.txt"});
    let call = ApprovalRequest {
        server: "fs".into(),
        tool: "write_file".into(),
        args_hash: cohort::policy::args_hash(&arguments),
        arguments,
        warning: high_risk_warning("write_file", &risk, t),
        risk,
    };
    format!(
        "## a plan of steps to check\n{}\n\n## stages to check\n{}\n\n## a HIGH call to approve\n{}\n\n",
        plan_notice(&step, &steps, t),
        plan_notice(&step, &stages, t),
        approval_notice(&step, &call, t),
    )
}

fn wording(lang: Language) -> String {
    let t = Texts::builtin(lang);
    let mut out = String::new();
    for (what, n) in notices(&t) {
        out.push_str(&format!("## {what}\nheadline: {}\n", n.headline(&t)));
        if matches!(n, Notice::TaskEnded { .. } | Notice::TaskStalled { .. }) {
            out.push_str(&format!("{}\n", n.render(&t)));
        }
        out.push('\n');
    }
    out.push_str(&format!(
        "## a question waits for the person\n{}\n\n",
        waiting_notice(&t)
    ));
    out.push_str(&checks(&t));
    out.push_str(&format!(
        "## a person's wait ran out\n{}\n\n",
        t.no_reply_notice(t.no_reply_agent("manager"), "t1")
    ));
    out.push_str("## spans\n");
    for s in [45, 180, 600, 7_500] {
        out.push_str(&format!("{s} s: {}\n", cohort::clock::span(s, &t)));
    }
    out
}

#[test]
fn what_people_read_keeps_its_wording_in_each_language() {
    for lang in Language::ALL {
        let (now, file) = (wording(lang), golden(lang));
        if std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1") {
            std::fs::write(&file, &now).unwrap();
            continue;
        }
        let golden = std::fs::read_to_string(&file).unwrap_or_default();
        assert_eq!(
            now, golden,
            "the wording people read in {lang} changed (`UPDATE_GOLDEN=1 cargo test --test suite wording::` rewrites {file}; review its diff)"
        );
    }
}
