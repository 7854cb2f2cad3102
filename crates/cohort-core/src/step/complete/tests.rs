//! Tests of `complete`: how a step's answer, failure or refusal changes the agent.
use super::*;
use crate::ids::{StageId, StageRef};
use crate::message::TaskInstruction;
use crate::report::TaskWritten;
use crate::state::AgentState;

/// An agent in stage `s` of task `t` with one running think step and nothing else queued.
fn alone_in_stage(skills: &[Skill]) -> (Agent, StepId) {
    let mut a = Agent::from(AgentState::new(
        "w".into(),
        "W".into(),
        "r".into(),
        "p".into(),
    ));
    a.skills = skills.to_vec();
    let stage = StageRef::Stage(StageId::from("s"));
    a.note_working_memory("t".into(), Some(stage.clone()));
    a.open_goal(&"t".into(), &StageId::from("s"));
    let step = StepState::new(
        "t".into(),
        stage,
        "w".into(),
        Executor::Skill(Skill::Think),
        "think it",
        "",
    );
    a.add_steps(vec![step]);
    let id = a.start_next().unwrap().step_id;
    (a, id)
}

fn now() -> Now {
    Now::current()
}

/// The step's model failed with `why`.
fn fail(a: &mut Agent, id: &StepId, why: &str) -> StepCompletion {
    done(complete_step(a, id, Err(why.into()), now(), false))
}

fn done(c: Completion) -> StepCompletion {
    match c {
        Completion::Done(d) => d,
        Completion::AskAgain { error, .. } => panic!("asked again: {error}"),
    }
}

#[test]
fn a_failure_that_leaves_nothing_to_run_gets_a_decision_once_then_the_manager_is_told() {
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Decision]);
    let c = fail(&mut a, &id, "model down");
    let stuck = c.output.update_stage_agent_state.unwrap().stuck;
    assert_eq!(stuck, None, "the agent goes on by itself");
    let next = a.agent_step.next().unwrap().clone();
    assert!(next.origin.is_recovery());
    assert!(
        next.text_content.contains("model down"),
        "{}",
        next.text_content
    );

    // The recovery decision fails too: now the manager decides.
    settle_step_for_test(&mut a, &id);
    let rid = a.start_next().unwrap().step_id;
    let c = fail(&mut a, &rid, "still down");
    let stuck = c.output.update_stage_agent_state.unwrap().stuck;
    assert_eq!(stuck.as_deref(), Some("still down"));
    assert!(a.agent_step.next().is_none());
}

#[test]
fn a_step_a_limit_stops_tells_the_manager_without_a_decision_of_its_own() {
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Decision]);
    let c = stop_step(&mut a, &id, "stopped: too many steps".into());
    let update = c.output.update_stage_agent_state.unwrap();
    assert_eq!(update.state, StageAgentState::Failed);
    assert_eq!(update.stuck.as_deref(), Some("stopped: too many steps"));
    assert!(a.agent_step.next().is_none(), "no recovery decision");
    assert_eq!(
        a.agent_step.get(&id).unwrap().execute_result,
        Some(StepResult::failed("stopped: too many steps"))
    );
}

#[test]
fn an_agent_without_decision_is_reported_stuck_at_once() {
    let (mut a, id) = alone_in_stage(&[Skill::Think]);
    let c = fail(&mut a, &id, "model down");
    let stuck = c.output.update_stage_agent_state.unwrap().stuck;
    assert_eq!(stuck.as_deref(), Some("model down"));
}

/// A manager with task_manager, running the step that acts on `text` from `sender` in
/// task `task` (outside any stage).
fn manager_acting_on(task: &str, sender: &str, text: &str) -> (Agent, StepId) {
    let notice = crate::message::Message::notice(
        task.into(),
        sender.into(),
        vec!["m".into()],
        StageRef::NoRelative,
        text.into(),
    );
    manager_acting_on_message(task, &notice)
}

/// A manager with task_manager, running the step that acts on `notice` in task `task`.
fn manager_acting_on_message(task: &str, notice: &crate::message::Message) -> (Agent, StepId) {
    let mut a = Agent::from(AgentState::new(
        "m".into(),
        "M".into(),
        "r".into(),
        "p".into(),
    ));
    a.skills = vec![Skill::TaskManager];
    a.note_working_memory(task.into(), None);
    crate::step::receive_message(&mut a, notice);
    let id = a.start_next().unwrap().step_id;
    (a, id)
}

#[test]
fn a_failed_step_on_the_operators_goal_is_tried_once_more_with_the_reason() {
    let (mut a, id) = manager_acting_on("base", crate::message::OPERATOR, "Write a haiku.");
    fail(&mut a, &id, "no <task_instruction> tag");
    let again = a.agent_step.next().unwrap().clone();
    assert_eq!(again.executor, Executor::Skill(Skill::TaskManager));
    assert!(
        crate::step::asks_to_act(&again),
        "still a step that must act"
    );
    assert!(again.text_content.contains("Write a haiku."));
    assert!(again.text_content.contains("no <task_instruction> tag"));

    // The second try fails too: no third.
    settle_step_for_test(&mut a, &id);
    let id = a.start_next().unwrap().step_id;
    fail(&mut a, &id, "still no tag");
    assert!(a.agent_step.next().is_none());
}

#[test]
fn a_notice_whose_answer_syncstate_refused_is_acted_on_once_more_with_the_refusal() {
    let (mut a, id) = manager_acting_on_message("t", &no_stage_left());
    assert_eq!(
        act_again_after_refusal(&mut a, &id, "stage s already ran", true),
        FollowUp::Again
    );
    let again = a.agent_step.next().unwrap().clone();
    assert!(again.text_content.contains("stage s already ran"));
    // The second try refused too: no third (and outside a task nothing for the runtime to close).
    settle_step_for_test(&mut a, &id);
    let id = a.start_next().unwrap().step_id;
    assert_eq!(
        act_again_after_refusal(&mut a, &id, "again", true),
        FollowUp::Nothing
    );
    assert!(a.agent_step.next().is_none());
}

/// The manager `m` of task `t` (base task `base`) judging it: one finished stage whose writer
/// reported "Rain on the roof".
/// The notice of task t, one stage of which ran, that asks its manager to judge it.
fn no_stage_left() -> crate::message::Message {
    let task =
        crate::state::TaskState::new("t".into(), "haiku".into(), "a haiku".into(), "m".into());
    let stage = crate::state::StageState::new(
        "t".into(),
        "write it".into(),
        [("w".into(), "write".into())].into(),
    );
    crate::team::notices::judge_task(&task, [&stage].into_iter(), &crate::texts::Texts::english())
}

fn manager_judging_task() -> (Agent, StepId) {
    let task =
        crate::state::TaskState::new("t".into(), "haiku".into(), "a haiku".into(), "m".into());
    let mut stage = crate::state::StageState::new(
        "t".into(),
        "write it".into(),
        [("w".into(), "write".into())].into(),
    );
    stage
        .completion_summary
        .insert("w".into(), "Rain on the roof".into());
    let notice = crate::team::notices::judge_task(
        &task,
        [&stage].into_iter(),
        &crate::texts::Texts::english(),
    );
    let (mut a, id) = manager_acting_on_message("t", &notice);
    a.settings_mut().base_task = Some("base".into());
    (a, id)
}

const ADD_AGAIN: &str = r#"{"action": "add_stage", "task_id": "t", "stages": [{"stage_intention": "write it", "agent_allocation": {"w": "write"}}]}"#;

/// The step's answer was `ADD_AGAIN`, which SyncState refused.
fn refused_add_stage(a: &mut Agent, id: &StepId) -> FollowUp {
    let add: serde_json::Value = serde_json::from_str(ADD_AGAIN).unwrap();
    a.update_step(
        id,
        result_update(StepResult::output(
            serde_json::json!({ "task_instruction": add }),
        )),
    );
    act_again_after_refusal(
        a,
        id,
        "stage `write it` has run 3 times, the most it may",
        true,
    )
}

#[test]
fn a_judgement_refused_twice_is_closed_by_the_runtime_and_the_refused_action_is_not_offered_again()
{
    let (mut a, id) = manager_judging_task();
    assert_eq!(refused_add_stage(&mut a, &id), FollowUp::Again);
    let again = a.agent_step.next().unwrap().clone();
    assert_eq!(
        again
            .refused_instruction
            .as_ref()
            .map(TaskInstruction::action),
        Some("add_stage")
    );
    // The second try is not offered the refused action, and giving it anyway is refused.
    let schema = crate::skills::answer_schema::answer_schema(Skill::TaskManager, &a, &again, &[]);
    let offered = schema.to_string();
    assert!(
        !offered.contains("add_stage") && offered.contains("finish_task"),
        "{offered}"
    );
    settle_step_for_test(&mut a, &id);
    let id = a.start_next().unwrap().step_id;
    let answer_again = format!(
        "<goal_reached>false</goal_reached><task_instruction>{ADD_AGAIN}</task_instruction>"
    );
    match complete_step(&mut a, &id, answer(&answer_again), now(), true) {
        Completion::AskAgain { error, .. } => {
            assert!(error.contains("refused just now"), "{error}")
        }
        Completion::Done(_) => panic!("the refused action was taken again"),
    }

    // Refused a second time all the same: the runtime ends the task, failed, saying why and
    // what the stages gave; no third try.
    match refused_add_stage(&mut a, &id) {
        FollowUp::Close(TaskInstruction::FinishTask {
            task_id,
            task_summary,
            outcome,
            summary_written,
        }) => {
            assert_eq!(task_id.as_str(), "t");
            assert_eq!(outcome, crate::message::TaskOutcome::Failed);
            // The runtime's words are beside the manager's (none), not in them.
            assert_eq!(task_summary, "");
            let Some(TaskWritten::ClosedByRuntime { reason, reports }) = summary_written.as_deref()
            else {
                panic!("{summary_written:?}")
            };
            assert!(reason.contains("has run 3 times"), "{reason}");
            let reports = reports.as_deref().unwrap_or_default();
            assert!(reports.contains("Rain on the roof"), "{reports}");
        }
        other => panic!("{other:?}"),
    }
    let result = a
        .agent_step
        .get(&id)
        .unwrap()
        .execute_result
        .clone()
        .unwrap();
    assert!(
        result
            .fired(crate::policy::Repair::RuntimeClosing)
            .unwrap()
            .contains("\"action\":\"finish_task\"")
    );
    assert!(a.agent_step.next().is_none());
}

/// The manager `m` of task `t` (base task `base`) running the step on the notice that stage
/// "write it" of task `t` is complete.
fn manager_judging_stage() -> (Agent, StepId, crate::state::StageState) {
    let mut a = Agent::from(AgentState::new(
        "m".into(),
        "M".into(),
        "r".into(),
        "p".into(),
    ));
    a.skills = vec![Skill::TaskManager];
    a.settings_mut().base_task = Some("base".into());
    let task = crate::state::TaskState::new("t".into(), "n".into(), "i".into(), "m".into());
    let stage = crate::state::StageState::new(
        "t".into(),
        "write it".into(),
        [("w".into(), "write".into())].into(),
    );
    crate::step::receive_message(
        &mut a,
        &crate::team::notices::stage_complete(&task, &stage, &crate::texts::Texts::english()),
    );
    let id = a.start_next().unwrap().step_id;
    (a, id, stage)
}

#[test]
fn a_stage_judgement_that_fails_twice_finishes_the_stage() {
    let (mut a, id, stage) = manager_judging_stage();
    // Answers without a task instruction, their re-asks spent.
    let unusable = || answer("I think the stage went fine.");
    let first = done(complete_step(&mut a, &id, unusable(), now(), false));
    assert_eq!(
        first.output.task_instruction, None,
        "a second try comes first"
    );
    settle_step_for_test(&mut a, &id);
    let id = a.start_next().unwrap().step_id;
    let second = done(complete_step(&mut a, &id, unusable(), now(), false));
    assert_eq!(
        second.output.task_instruction,
        Some(TaskInstruction::FinishStage {
            task_id: "t".into(),
            stage_id: stage.stage_id.clone()
        })
    );
    assert!(second.failure.is_some(), "the step itself still failed");
}

fn answer(text: &str) -> Result<ChatReply, String> {
    Ok(ChatReply {
        text: text.into(),
        ..Default::default()
    })
}

#[test]
fn a_verdict_its_action_keeps_contradicting_is_carried_out_once_the_reasks_are_spent() {
    let task =
        crate::state::TaskState::new("t".into(), "haiku".into(), "a haiku".into(), "m".into());
    let mut stage = crate::state::StageState::new(
        "t".into(),
        "write it".into(),
        [("w".into(), "write".into())].into(),
    );
    stage
        .completion_summary
        .insert("w".into(), "Rain on the roof".into());
    let notice = crate::team::notices::judge_task(
        &task,
        [&stage].into_iter(),
        &crate::texts::Texts::english(),
    );
    let (mut a, id) = manager_acting_on_message("t", &notice);
    let add = r#"<goal_reached>true</goal_reached><task_instruction>{"action": "add_stage", "task_id": "t", "stages": [{"stage_intention": "more", "agent_allocation": {"w": "more"}}]}</task_instruction>"#;
    // While it may be asked again, it is.
    match complete_step(&mut a, &id, answer(add), now(), true) {
        Completion::AskAgain { error, .. } => {
            assert!(error.contains("judged the goal reached"))
        }
        Completion::Done(_) => panic!("not asked again"),
    }
    // Its re-asks spent: the task finishes, its summary composed from the stage reports.
    let c = done(complete_step(&mut a, &id, answer(add), now(), false));
    match c.output.task_instruction {
        Some(TaskInstruction::FinishTask {
            task_id,
            task_summary,
            outcome,
            summary_written,
        }) => {
            assert_eq!(task_id.as_str(), "t");
            assert_eq!(outcome, crate::message::TaskOutcome::Finished);
            assert_eq!(task_summary, "");
            let Some(written @ TaskWritten::Composed { reports }) = summary_written.as_deref()
            else {
                panic!("{summary_written:?}")
            };
            assert!(reports.contains("Rain on the roof"), "{reports}");
            let whole = written.render(&task_summary, &crate::texts::Texts::english());
            assert!(whole.contains("Composed by the runtime"), "{whole}");
        }
        other => panic!("{other:?}"),
    }
    let result = a
        .agent_step
        .get(&id)
        .unwrap()
        .execute_result
        .clone()
        .unwrap();
    assert!(
        result
            .fired(crate::policy::Repair::VerdictCarriedOut)
            .unwrap()
            .contains("reached")
    );
    assert!(c.failure.is_none());
}

#[test]
fn a_closing_action_stands_when_its_verdict_said_not_reached_after_the_reasks_a_task_failed() {
    let (mut a, id) = manager_acting_on_message("t", &no_stage_left());
    let finish = r#"<goal_reached>false</goal_reached><task_instruction>{"action": "finish_task", "task_id": "t", "task_summary": "the haiku"}</task_instruction>"#;
    let c = done(complete_step(&mut a, &id, answer(finish), now(), false));
    assert!(matches!(
        c.output.task_instruction,
        Some(TaskInstruction::FinishTask { ref task_summary, outcome: crate::message::TaskOutcome::Failed, .. }) if task_summary == "the haiku"
    ));
}

fn settle_step_for_test(a: &mut Agent, id: &StepId) {
    crate::step::settle_step(a, id, Some("model down".into()), &[]);
}

#[test]
fn a_stage_judged_reached_is_finished_when_the_action_kept_redoing_it() {
    let (mut a, id, stage) = manager_judging_stage();
    let retry = format!(
        r#"<goal_reached>true</goal_reached><task_instruction>{{"action": "retry_stage", "task_id": "t", "stage_id": "{}", "agent_allocation": {{"w": "again"}}}}</task_instruction>"#,
        stage.stage_id
    );
    let c = done(complete_step(&mut a, &id, answer(&retry), now(), false));
    assert_eq!(
        c.output.task_instruction,
        Some(TaskInstruction::FinishStage {
            task_id: "t".into(),
            stage_id: stage.stage_id.clone()
        })
    );
}

#[test]
fn an_answer_stopped_in_a_loop_is_asked_again_saying_so() {
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Decision]);
    let looped = Ok(ChatReply {
        text: "drip drop on the window pane,".into(),
        cut: Some(crate::call::Cut::Repetition),
        ..Default::default()
    });
    match complete_step(&mut a, &id, looped, now(), true) {
        Completion::AskAgain { error, .. } => {
            assert!(error.contains("same passage over and over"), "{error}")
        }
        Completion::Done(_) => panic!("not asked again"),
    }
}

#[test]
fn a_refusal_the_same_action_may_mend_leaves_that_action_offered() {
    let (mut a, id) = manager_judging_task();
    let add: serde_json::Value = serde_json::from_str(ADD_AGAIN).unwrap();
    a.update_step(
        &id,
        result_update(StepResult::output(
            serde_json::json!({ "task_instruction": add }),
        )),
    );
    let follow = act_again_after_refusal(&mut a, &id, "there is no agent `wirter`", false);
    assert_eq!(follow, FollowUp::Again);
    let again = a.agent_step.next().unwrap().clone();
    assert_eq!(again.refused_instruction, None);
    assert!(again.text_content.contains("no agent `wirter`"));
}

#[test]
fn a_model_that_does_not_answer_twice_closes_nothing() {
    let (mut a, id) = manager_judging_task();
    let first = fail(&mut a, &id, "the LLM endpoint timed out");
    assert_eq!(first.output.task_instruction, None);
    settle_step_for_test(&mut a, &id);
    let id = a.start_next().unwrap().step_id;
    let second = fail(&mut a, &id, "the LLM endpoint timed out");
    assert_eq!(
        second.output.task_instruction, None,
        "an outage must not end the task"
    );
}

#[test]
fn a_json_answer_stopped_in_a_loop_is_closed_where_the_policy_allows_and_recorded() {
    let looped = || {
        Ok(ChatReply {
            text: r#"{"think": "Soft rain on the roof. Gentle whispers falling softly"#.into(),
            cut: Some(crate::call::Cut::Repetition),
            ..Default::default()
        })
    };
    // `auto`: closed, the step finishes with the passage, both repairs recorded and counted.
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Decision]);
    let c = done(complete_step(&mut a, &id, looped(), now(), true));
    let result = a
        .agent_step
        .get(&id)
        .unwrap()
        .execute_result
        .clone()
        .unwrap();
    assert_eq!(
        result["think"],
        "Soft rain on the roof. Gentle whispers falling softly"
    );
    assert!(result.fired(crate::policy::Repair::LoopCut).is_some());
    assert!(result.fired(crate::policy::Repair::ClosedJson).is_some());
    assert_eq!(
        c.output.repairs,
        [
            crate::policy::Repair::LoopCut,
            crate::policy::Repair::ClosedJson
        ]
    );
    // `strict`: the answer is not mended, only asked about again.
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Decision]);
    a.settings_mut().repairs = crate::policy::Repairs::preset(crate::policy::Preset::Strict);
    assert!(matches!(
        complete_step(&mut a, &id, looped(), now(), true),
        Completion::AskAgain { .. }
    ));
}

#[test]
fn a_completion_report_carries_what_the_agents_work_steps_produced() {
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Summary]);
    done(complete_step(
        &mut a,
        &id,
        answer("<think>Cold rain on the eaves</think>"),
        now(),
        false,
    ));
    crate::step::settle_step(&mut a, &id, None, &[]);
    // The summary runs next, instead of the reflection the runtime queued.
    let queued = a.agent_step.next().expect("a reflection").step_id.clone();
    a.remove_step(&queued);
    let summary = StepState::new(
        "t".into(),
        StageRef::Stage(StageId::from("s")),
        "w".into(),
        Executor::Skill(Skill::Summary),
        "Summarise my work in this stage",
        "",
    );
    a.add_steps(vec![summary]);
    let id = a.start_next().unwrap().step_id;
    let report = "<completion_summary>I wrote it: cold rain on the eaves.</completion_summary>";
    let out = done(complete_step(&mut a, &id, answer(report), now(), false)).output;
    let completion = out
        .update_stage_agent_completion
        .expect("a completion report");
    assert_eq!(
        completion.results,
        vec!["Cold rain on the eaves".to_owned()]
    );
    assert!(completion.completion_summary.contains("I wrote it"));
}

/// Every English word in `text` a Chinese reader would trip on, but those of the intention
/// `alone_in_stage` gives its step ("think it": data, not the runtime's words).
fn english(text: &str) -> Vec<String> {
    crate::texts::english_words(text, &["it"])
}

#[test]
fn a_chinese_agent_gets_the_runtimes_steps_shared_lines_and_repair_notes_in_chinese() {
    let zh = crate::texts::Texts::builtin(crate::texts::Language::Zh);
    // A failure with nothing left to run: the recovery decision.
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Decision]);
    a.settings_mut().texts = zh.clone();
    let c = fail(&mut a, &id, "模型没有回答");
    let shared = c.output.send_shared_info.unwrap().content;
    let recovery = a.agent_step.next().unwrap().clone();
    // A plan that ran dry: the closing reflection.
    let (mut a, id) = alone_in_stage(&[Skill::Think, Skill::Reflection]);
    a.settings_mut().texts = zh.clone();
    let looped = Ok(ChatReply {
        text: "<think>雨落屋檐</think>".into(),
        cut: Some(crate::call::Cut::Repetition),
        ..Default::default()
    });
    done(complete_step(&mut a, &id, looped, now(), false));
    let step = a.agent_step.get(&id).unwrap();
    let repairs = step.execute_result.as_ref().unwrap().repairs.clone();
    let reflection = a.agent_step.next().unwrap().clone();
    assert_eq!(reflection.origin, StepOrigin::ClosingReflection);
    // A tool call that failed: the tool_decision after it.
    let (mut a, _) = alone_in_stage(&[Skill::ToolDecision]);
    a.settings_mut().texts = zh.clone();
    let tool = StepState::new(
        "t".into(),
        StageRef::Stage(StageId::from("s")),
        "w".into(),
        Executor::Tool("ws".into()),
        "读取文件",
        "",
    );
    let tid = tool.step_id.clone();
    a.add_next_steps(vec![tool]);
    complete_tool_step(&mut a, &tid, Err("`ENOENT`".into()));
    let decision = a.agent_step.next().unwrap().clone();
    let mut said = vec![shared];
    said.extend(repairs.iter().map(|f| f.what.clone()));
    for s in [recovery, reflection, decision] {
        said.extend([s.step_intention, s.text_content]);
    }
    assert!(repairs.len() == 1 && said.len() == 8, "{said:?}");
    for text in said {
        assert!(english(&text).is_empty(), "{text}: {:?}", english(&text));
    }
}
