//! Unit tests of SyncState's transitions: task creation, stage hand-over, completion, retry.

use super::*;
use crate::ids::{StageRef, WaitId};
use crate::message::{CompletionUpdate, Instruction, StagePlan, TaskInstruction, TaskOutcome};
use crate::notice::Notice;

/// `apply` with its refusal as an error, as the SyncState actor answers it.
pub(super) trait TryApply {
    fn try_apply(&mut self, out: &ExecuteOutput, now: &str) -> Result<Applied, SyncError>;
}

impl TryApply for SyncCore {
    fn try_apply(&mut self, out: &ExecuteOutput, now: &str) -> Result<Applied, SyncError> {
        // A test's step is in the base task unless it says otherwise.
        let mut a = match out.task_id {
            None => self.apply(
                &ExecuteOutput {
                    task_id: Some(self.base_task().clone()),
                    ..out.clone()
                },
                now,
            ),
            Some(_) => self.apply(out, now),
        };
        match a.refused.take() {
            Some(e) => Err(e),
            None => Ok(a),
        }
    }
}

pub(super) fn core() -> SyncCore {
    let roster = ["m", "a", "b"]
        .iter()
        .map(|id| Member::new(*id, "r"))
        .collect();
    SyncCore::new(roster, &["m".into()], &[])
}

/// `agent`'s step giving `i`, in no task: [`TryApply`] puts an add_task's step in the base task
/// (where a manager gives it), or use [`by_in`].
pub(super) fn by(agent: &str, i: TaskInstruction) -> ExecuteOutput {
    ExecuteOutput {
        agent_id: Some(agent.into()),
        task_instruction: Some(i),
        ..Default::default()
    }
}

/// `agent`'s step in task `task`, giving `i`.
pub(super) fn by_in(task: &TaskId, agent: &str, i: TaskInstruction) -> ExecuteOutput {
    ExecuteOutput {
        task_id: Some(task.clone()),
        ..by(agent, i)
    }
}

fn plan(intention: &str, agents: &[&str]) -> StagePlan {
    StagePlan {
        stage_intention: intention.into(),
        agent_allocation: agents
            .iter()
            .map(|a| (AgentId::from(*a), format!("{a}'s goal")))
            .collect(),
    }
}

/// Gives task `t` a stage of `a` and finishes it: a task with a finished stage may be finished
/// (see `team::outcome`); the changes that made.
pub(super) fn stage_done(c: &mut SyncCore, t: &TaskId) -> Vec<Change> {
    let add = TaskInstruction::AddStage {
        task_id: t.clone(),
        stages: vec![plan("the work", &["a"])],
    };
    let added = c.try_apply(&by("m", add), "now").unwrap();
    let stage_id = c.task(t).unwrap().stage_list.last().unwrap().clone();
    let finish = TaskInstruction::FinishStage {
        task_id: t.clone(),
        stage_id,
    };
    let finished = c.try_apply(&by("m", finish), "now").unwrap();
    [added.changes, finished.changes].concat()
}

fn instruction_of(m: &Message) -> Option<Instruction> {
    m.instruction_body().cloned()
}

/// Creates a task with two stages (a+b, then a) and returns (core, task, [stage ids]).
pub(super) fn two_stage_task() -> (SyncCore, TaskId, Vec<StageId>) {
    let mut c = core();
    let t = TaskId::random();
    let out = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::AddTask {
                    attachments: Vec::new(),
                    task_id: t.clone(),
                    task_name: "n".into(),
                    task_intention: "i".into(),
                    requested_by: None,
                    goal_step: None,
                    trace_id: None,
                },
            ),
            "now",
        )
        .unwrap();
    assert_eq!(out.messages.len(), 1);
    assert!(
        out.messages[0].message.contains(t.as_str()),
        "the manager learns the new task's id"
    );
    let out = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::AddStage {
                    task_id: t.clone(),
                    stages: vec![plan("one", &["a", "b"]), plan("two", &["a"])],
                },
            ),
            "now",
        )
        .unwrap();
    let instructions: Vec<_> = out.messages.iter().filter_map(instruction_of).collect();
    let starts = instructions
        .iter()
        .filter(|i| matches!(i, Instruction::StartStage { .. }))
        .count();
    assert_eq!(starts, 2, "start_stage to a and b");
    // Every allocated agent records each stage in its working memory when it is added.
    let noted: Vec<_> = out
        .messages
        .iter()
        .filter(|m| {
            matches!(
                instruction_of(m),
                Some(Instruction::UpdateWorkingMemory { .. })
            )
        })
        .map(|m| m.receiver.len())
        .collect();
    assert_eq!(
        noted,
        vec![2, 1],
        "update_working_memory per stage, to its agents"
    );
    let stages = c.task(&t).unwrap().stage_list.clone();
    (c, t, stages)
}

fn complete(c: &mut SyncCore, t: &TaskId, s: &StageId, agent: &str) -> Applied {
    complete_as(c, (t, s), agent, crate::report::Written::Own)
}

/// As [`complete`], the runtime having made the report as `written` says.
fn complete_as(
    c: &mut SyncCore,
    (t, s): (&TaskId, &StageId),
    agent: &str,
    written: crate::report::Written,
) -> Applied {
    let out = ExecuteOutput {
        agent_id: Some(agent.into()),
        update_stage_agent_completion: Some(CompletionUpdate {
            task_id: t.clone(),
            stage_id: s.clone(),
            agent_id: agent.into(),
            completion_summary: format!("{agent} done"),
            results: vec![format!("{agent}'s work")],
            written,
        }),
        ..Default::default()
    };
    c.try_apply(&out, "now").unwrap()
}

#[test]
fn add_stage_joins_agents_and_starts_only_the_first_stage() {
    let (c, t, stages) = two_stage_task();
    let task = c.task(&t).unwrap();
    assert_eq!(
        task.task_group,
        vec![AgentId::from("m"), "a".into(), "b".into()]
    );
    assert_eq!(task.execution_state, ExecutionState::Running);
    assert_eq!(
        c.stage(&stages[0]).unwrap().execution_state,
        ExecutionState::Running
    );
    assert_eq!(
        c.stage(&stages[1]).unwrap().execution_state,
        ExecutionState::Init
    );
}

#[test]
fn the_manager_is_told_once_every_allocated_agent_has_summarised() {
    let (mut c, t, stages) = two_stage_task();
    assert!(complete(&mut c, &t, &stages[0], "a").messages.is_empty());
    let out = complete(&mut c, &t, &stages[0], "b");
    assert_eq!(out.messages.len(), 1);
    let m = &out.messages[0];
    assert_eq!(m.receiver, vec![AgentId::from("m")]);
    assert_eq!(m.sender_id.as_str(), "[TaskState]");
    assert!(!m.need_reply);
    assert!(m.message.contains("a done") && m.message.contains("b done"));
    assert_eq!(m.stage_relative, StageRef::Stage(stages[0].clone()));
    // A stage's judgement reads the reports; the work results are kept for the task's (they
    // come with a report only where the runtime added them to it).
    let Some(Notice::StageComplete { stage, .. }) = m.notice_body() else {
        panic!("{m:?}")
    };
    assert!(stage.reports.iter().all(|r| r.results.is_empty()));
}

#[test]
fn what_the_runtime_added_to_a_report_is_kept_beside_the_agents_words_and_shown_with_them() {
    use crate::report::Written;
    let (mut c, t, stages) = two_stage_task();
    complete_as(&mut c, (&t, &stages[0]), "a", Written::ResultsAdded);
    let out = complete(&mut c, &t, &stages[0], "b");
    let stage = c.stage(&stages[0]).unwrap();
    assert_eq!(stage.completion_summary[&AgentId::from("a")], "a done");
    assert_eq!(
        stage.completion_written[&AgentId::from("a")],
        Written::ResultsAdded
    );
    assert!(!stage.completion_written.contains_key(&AgentId::from("b")));
    // The manager reads a's report with its results, b's as b wrote it.
    let told = &out.messages[0].message;
    assert!(
        told.contains("a done") && told.contains("a's work"),
        "{told}"
    );
    assert!(told.contains("added by the runtime"), "{told}");
    assert!(!told.contains("b's work"), "{told}");
    // Given again in its own words, the report drops what was added.
    complete(&mut c, &t, &stages[0], "a");
    assert!(c.stage(&stages[0]).unwrap().completion_written.is_empty());
}

#[test]
fn finish_stage_hands_over_to_the_next_stage_then_asks_for_a_task_judgement() {
    let (mut c, t, stages) = two_stage_task();
    complete(&mut c, &t, &stages[0], "a");
    complete(&mut c, &t, &stages[0], "b");
    let out = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::FinishStage {
                    task_id: t.clone(),
                    stage_id: stages[0].clone(),
                },
            ),
            "now",
        )
        .unwrap();
    assert_eq!(
        c.stage(&stages[0]).unwrap().execution_state,
        ExecutionState::Finished
    );
    assert_eq!(
        c.stage(&stages[1]).unwrap().execution_state,
        ExecutionState::Running
    );
    let kinds: Vec<_> = out
        .messages
        .iter()
        .map(|m| instruction_of(m).map(|i| format!("{i:?}")))
        .collect();
    assert!(kinds[0].as_ref().unwrap().starts_with("FinishStage"));
    assert!(kinds[1].as_ref().unwrap().starts_with("StartStage"));
    let out = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::FinishStage {
                    task_id: t.clone(),
                    stage_id: stages[1].clone(),
                },
            ),
            "now",
        )
        .unwrap();
    let judge = out.messages.last().unwrap();
    assert!(instruction_of(judge).is_none());
    assert!(judge.message.contains("finish_task"));
    // The task's judgement gets each agent's work results beside its report.
    let Some(Notice::NoStageLeft { stages: judged, .. }) = judge.notice_body() else {
        panic!("{judge:?}")
    };
    let results: Vec<_> = judged[0]
        .reports
        .iter()
        .map(|r| r.results.clone())
        .collect();
    assert_eq!(results, vec![vec!["a's work"], vec!["b's work"]]);
    assert!(
        !judge.message.contains("a's work"),
        "results are not rendered"
    );
    let out = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::FinishTask {
                    task_id: t.clone(),
                    task_summary: "all done".into(),
                    outcome: TaskOutcome::Finished,
                    summary_written: None,
                },
            ),
            "now",
        )
        .unwrap();
    assert_eq!(
        c.task(&t).unwrap().execution_state,
        ExecutionState::Finished
    );
    assert_eq!(
        c.task(&t).unwrap().task_summary.as_deref(),
        Some("all done")
    );
    assert_eq!(
        out.messages[0].receiver.len(),
        3,
        "finish_task goes to the whole group"
    );
}

#[test]
fn only_the_manager_may_steer_and_bad_ids_change_nothing() {
    let (mut c, t, stages) = two_stage_task();
    let e = c.try_apply(
        &by(
            "a",
            TaskInstruction::FinishStage {
                task_id: t.clone(),
                stage_id: stages[0].clone(),
            },
        ),
        "now",
    );
    assert!(matches!(e, Err(SyncError::NotManager { .. })));
    let e = c.try_apply(
        &by(
            "m",
            TaskInstruction::FinishStage {
                task_id: t.clone(),
                stage_id: "nope".into(),
            },
        ),
        "now",
    );
    assert!(matches!(e, Err(SyncError::UnknownStage { .. })));
    let e = c.try_apply(
        &by(
            "m",
            TaskInstruction::FinishStage {
                task_id: t.clone(),
                stage_id: stages[1].clone(),
            },
        ),
        "now",
    );
    assert!(matches!(e, Err(SyncError::StageNotRunning { .. })));
    let e = c.try_apply(
        &by(
            "m",
            TaskInstruction::AddStage {
                task_id: t.clone(),
                stages: vec![plan("x", &["ghost"])],
            },
        ),
        "now",
    );
    assert_eq!(e, Err(SyncError::UnknownAgent("ghost".into())));
    assert_eq!(c.task(&t).unwrap().stage_list.len(), 2);
    let base = c.base_task().clone();
    let e = c.try_apply(
        &by(
            "m",
            TaskInstruction::FinishTask {
                task_id: base,
                task_summary: String::new(),
                outcome: TaskOutcome::Finished,
                summary_written: None,
            },
        ),
        "now",
    );
    assert_eq!(e, Err(SyncError::BaseTask));
}

#[test]
fn retry_stage_inserts_a_corrected_stage_right_after_and_starts_it() {
    let (mut c, t, stages) = two_stage_task();
    let mut alloc = plan("", &["b"]).agent_allocation;
    alloc.insert("m".into(), "help".into());
    let out = c
        .try_apply(
            &by(
                "m",
                TaskInstruction::RetryStage {
                    task_id: t.clone(),
                    stage_id: stages[0].clone(),
                    stage_intention: None,
                    agent_allocation: alloc,
                },
            ),
            "now",
        )
        .unwrap();
    let list = c.task(&t).unwrap().stage_list.clone();
    assert_eq!(list.len(), 3);
    assert_eq!(list[0], stages[0]);
    assert_eq!(list[2], stages[1]);
    let new = c.stage(&list[1]).unwrap();
    assert_eq!(new.stage_intention, "one");
    assert_eq!(new.execution_state, ExecutionState::Running);
    assert_eq!(
        c.stage(&stages[0]).unwrap().execution_state,
        ExecutionState::Failed
    );
    assert_eq!(
        c.stage(&stages[1]).unwrap().execution_state,
        ExecutionState::Init
    );
    let finish = instruction_of(&out.messages[0]).unwrap();
    assert_eq!(
        finish,
        Instruction::FinishStage {
            stage_id: stages[0].clone()
        }
    );
    assert_eq!(
        out.messages[0].receiver,
        vec![AgentId::from("a"), "b".into()]
    );
    assert_eq!(
        out.messages.len(),
        3,
        "finish_stage + start_stage to b and m"
    );
}

#[test]
fn messages_to_unknown_agents_or_tasks_are_refused_and_deliveries_are_recorded() {
    let mut c = core();
    let base = c.base_task().clone();
    let mut m = Message::notice(
        base.clone(),
        "m".into(),
        vec!["ghost".into()],
        StageRef::NoRelative,
        "hi".into(),
    );
    assert_eq!(
        c.submit(m.clone()),
        Err(SyncError::UnknownAgent("ghost".into()))
    );
    m.receiver = vec!["a".into()];
    m.waiting = Some(vec![WaitId::random(), WaitId::random()]);
    assert!(c.submit(m.clone()).is_err());
    m.waiting = None;
    assert_eq!(c.submit(m.clone()).unwrap().messages.len(), 1);
    c.record_sent(m, "now");
    assert_eq!(c.task(&base).unwrap().shared_conversation_pool.len(), 1);
}

#[test]
fn a_refused_step_still_counts_its_tokens_and_marks_its_agent_failed_for_the_manager() {
    let (mut c, t, stages) = two_stage_task();
    let out = ExecuteOutput {
        agent_id: Some("a".into()),
        token_usage: Some((t.clone(), crate::state::TokenUsage::new(10, 5))),
        update_stage_agent_state: Some(crate::message::StageAgentUpdate {
            task_id: t.clone(),
            stage_id: stages[0].clone(),
            agent_id: "a".into(),
            state: crate::state::StageAgentState::Working,
            stuck: None,
        }),
        send_message: Some(Message::notice(
            t.clone(),
            "a".into(),
            vec!["ghost".into()],
            StageRef::Stage(stages[0].clone()),
            "hi".into(),
        )),
        ..Default::default()
    };
    let applied = c.apply(&out, "now");
    assert_eq!(
        applied.refused,
        Some(SyncError::UnknownAgent("ghost".into()))
    );
    assert_eq!(c.task(&t).unwrap().token_usage.total(), 15);
    assert_eq!(
        c.stage(&stages[0]).unwrap().every_agent_state[&AgentId::from("a")],
        crate::state::StageAgentState::Failed
    );
    let notice = applied
        .messages
        .iter()
        .find(|m| m.receiver == vec![AgentId::from("m")])
        .expect("the manager is told");
    assert!(notice.message.contains("cannot go on") && notice.message.contains("ghost"));
}

#[test]
fn messages_into_finished_tasks_or_stages_are_refused_and_nobody_speaks_as_the_runtime() {
    let (mut c, t, stages) = two_stage_task();
    c.try_apply(
        &by(
            "m",
            TaskInstruction::FinishStage {
                task_id: t.clone(),
                stage_id: stages[0].clone(),
            },
        ),
        "now",
    )
    .unwrap();
    let late = Message::notice(
        t.clone(),
        "a".into(),
        vec!["b".into()],
        StageRef::Stage(stages[0].clone()),
        "late".into(),
    );
    assert!(c.submit(late).is_err());
    let spoof = Message::notice(
        t.clone(),
        crate::message::TASK_STATE_SENDER.into(),
        vec!["b".into()],
        StageRef::NoRelative,
        "x".into(),
    );
    assert!(c.submit(spoof).is_err());
    c.try_apply(
        &by(
            "m",
            TaskInstruction::FinishTask {
                task_id: t.clone(),
                task_summary: "s".into(),
                outcome: TaskOutcome::Failed,
                summary_written: None,
            },
        ),
        "now",
    )
    .unwrap();
    let after = Message::notice(
        t.clone(),
        "a".into(),
        vec!["b".into()],
        StageRef::NoRelative,
        "after".into(),
    );
    assert!(matches!(c.submit(after), Err(SyncError::TaskOver(..))));
}

#[test]
fn only_the_running_stage_can_be_retried() {
    let (mut c, t, stages) = two_stage_task();
    let retry = |s: &StageId| {
        by(
            "m",
            TaskInstruction::RetryStage {
                task_id: t.clone(),
                stage_id: s.clone(),
                stage_intention: None,
                agent_allocation: plan("", &["b"]).agent_allocation,
            },
        )
    };
    assert!(matches!(
        c.try_apply(&retry(&stages[1]), "now"),
        Err(SyncError::StageNotRunning { .. })
    ));
    c.try_apply(&retry(&stages[0]), "now").unwrap();
    assert!(
        matches!(
            c.try_apply(&retry(&stages[0]), "now"),
            Err(SyncError::StageNotRunning { .. })
        ),
        "a retried stage is failed"
    );
}

#[test]
fn routed_messages_are_numbered_on_from_the_last_one_a_store_had() {
    let (c, t, _) = two_stage_task();
    let mut c = c.numbering_from(41);
    let m = Message::notice(
        t,
        "a".into(),
        vec!["b".into()],
        StageRef::NoRelative,
        "x".into(),
    );
    let (first, _, changes) = c.record_sent(m.clone(), "now");
    let (second, _, _) = c.record_sent(m, "now");
    assert_eq!((first, second), (42, 43));
    assert!(matches!(
        &changes[0],
        Change::Task(TaskChange::Conversation { message_no: 42, .. })
    ));
}

#[test]
fn one_stage_goal_runs_at_most_three_times_in_a_task_by_add_stage_or_retry_stage() {
    let (mut c, t, stages) = two_stage_task();
    let again = |p: StagePlan| {
        by(
            "m",
            TaskInstruction::AddStage {
                task_id: t.clone(),
                stages: vec![p],
            },
        )
    };
    // The running stage "one" (a, b), asked for twice more (once with other agents): new
    // tries the judgement chose.
    c.try_apply(&again(plan(" One ", &["a", "b"])), "now")
        .unwrap();
    c.try_apply(&again(plan("one", &["b"])), "now").unwrap();
    let why = c
        .try_apply(&again(plan("one", &["a", "b"])), "now")
        .unwrap_err()
        .to_string();
    assert!(
        why.contains("has run 3 times") && why.contains("finish_stage"),
        "{why}"
    );
    // Retrying it counts as a run too.
    let retry = by(
        "m",
        TaskInstruction::RetryStage {
            task_id: t.clone(),
            stage_id: stages[0].clone(),
            stage_intention: None,
            agent_allocation: plan("one", &["a", "b"]).agent_allocation,
        },
    );
    assert!(c.try_apply(&retry, "now").is_err());
    // Nor with other agents; another goal is work of its own.
    assert!(c.try_apply(&again(plan("one", &["a"])), "now").is_err());
    c.try_apply(&again(plan("three", &["a"])), "now").unwrap();
}

/// A team of a manager `m`, an agent `a` and a person `op`.
pub(super) fn with_a_person() -> SyncCore {
    let mut roster: Vec<Member> = ["m", "a"].iter().map(|id| Member::new(*id, "r")).collect();
    roster.push(Member {
        human: true,
        ..Member::new("op", "operator")
    });
    SyncCore::new(roster, &["m".into()], &[])
}

/// A task "Haiku" `m` makes for `requested_by`'s goal.
pub(super) fn add_task_for(c: &mut SyncCore, requested_by: Option<&str>) -> TaskId {
    let t = TaskId::random();
    let i = TaskInstruction::AddTask {
        attachments: Vec::new(),
        task_id: t.clone(),
        task_name: "Haiku".into(),
        task_intention: "write one".into(),
        requested_by: requested_by.map(AgentId::from),
        goal_step: None,
        trace_id: None,
    };
    c.try_apply(&by("m", i), "now").unwrap();
    t
}

/// A task made for a person's goal tells that person how it ended, with its summary; one the
/// manager made on its own (or for someone who is not a person) tells nobody.
#[test]
fn the_person_whose_goal_a_task_served_is_told_how_it_ended() {
    let mut c = with_a_person();
    let finish = |t: &TaskId, outcome| {
        by_in(
            t,
            "m",
            TaskInstruction::FinishTask {
                task_id: t.clone(),
                task_summary: "Cold rain on the eaves".into(),
                outcome,
                summary_written: None,
            },
        )
    };
    let told = |a: &Applied| -> Vec<(Vec<AgentId>, String)> {
        a.messages
            .iter()
            .filter(|m| matches!(m.notice_body(), Some(Notice::TaskEnded { .. })))
            .map(|m| (m.receiver.clone(), m.message.clone()))
            .collect()
    };

    let t = add_task_for(&mut c, Some("op"));
    assert_eq!(c.task(&t).unwrap().requested_by, Some("op".into()));
    stage_done(&mut c, &t);
    let out = c
        .try_apply(&finish(&t, TaskOutcome::Finished), "now")
        .unwrap();
    assert_eq!(
        told(&out),
        [(
            vec![AgentId::from("op")],
            "Your task \"Haiku\" finished.\nCold rain on the eaves".to_owned()
        )]
    );

    // A failed one says so, with why.
    let t = add_task_for(&mut c, Some("op"));
    let out = c
        .try_apply(&finish(&t, TaskOutcome::Failed), "now")
        .unwrap();
    let said = told(&out);
    assert_eq!(said.len(), 1);
    assert!(
        said[0].1.starts_with("Your task \"Haiku\" failed."),
        "{}",
        said[0].1
    );

    // Nobody, or an LLM agent, is not told.
    for who in [None, Some("a")] {
        let t = add_task_for(&mut c, who);
        let out = c
            .try_apply(&finish(&t, TaskOutcome::Failed), "now")
            .unwrap();
        assert!(told(&out).is_empty(), "{who:?}");
    }
}

#[test]
fn what_the_runtime_wrote_of_a_task_summary_is_kept_beside_the_managers_words() {
    let mut c = with_a_person();
    let t = add_task_for(&mut c, Some("op"));
    stage_done(&mut c, &t);
    let written = crate::report::TaskWritten::ResultsAdded {
        reports: "- `a` produced: Cold rain on the eaves".into(),
    };
    let finish = TaskInstruction::FinishTask {
        task_id: t.clone(),
        task_summary: "The haiku is written.".into(),
        outcome: TaskOutcome::Finished,
        summary_written: Some(Box::new(written.clone())),
    };
    let out = c.try_apply(&by_in(&t, "m", finish), "now").unwrap();
    let task = c.task(&t).unwrap();
    assert_eq!(task.execution_state, ExecutionState::Finished);
    assert_eq!(task.task_summary.as_deref(), Some("The haiku is written."));
    assert_eq!(task.summary_written.as_deref(), Some(&written));
    // The person is told the whole, the runtime's part marked as its own.
    let told = out
        .messages
        .iter()
        .find(|m| matches!(m.notice_body(), Some(Notice::TaskEnded { .. })))
        .unwrap();
    assert!(
        told.message.contains("The haiku is written.\n\n"),
        "{}",
        told.message
    );
    assert!(
        told.message.contains("added by the runtime"),
        "{}",
        told.message
    );
    assert!(
        told.message.contains("Cold rain on the eaves"),
        "{}",
        told.message
    );
    // A reader following the changes has both, apart.
    let mut read = crate::state::TaskState::new(t.clone(), "Haiku".into(), "i".into(), "m".into());
    for change in &out.changes {
        if let crate::event::Change::Task(tc) = change {
            crate::event::apply_task(&mut read, tc);
        }
    }
    assert_eq!(read.task_summary, task.task_summary);
    assert_eq!(read.summary_written, task.summary_written);
}

#[test]
fn a_task_a_person_cancelled_tells_its_goal_giver_why_once() {
    let mut c = with_a_person();
    let t = add_task_for(&mut c, Some("op"));
    let out = c.cancel_task(&t, &"op".into(), "wrong goal").unwrap();
    let told = out
        .messages
        .iter()
        .find(|m| matches!(m.notice_body(), Some(Notice::TaskEnded { .. })))
        .unwrap();
    assert_eq!(
        told.message.matches("wrong goal").count(),
        1,
        "{}",
        told.message
    );
}

#[test]
fn a_task_made_for_a_goal_names_the_trace_of_the_step_that_acted_on_it() {
    let roster: Vec<Member> = ["m"].iter().map(|id| Member::new(*id, "r")).collect();
    let mut c = SyncCore::new(roster, &["m".into()], &[]);
    let (t, goal) = (TaskId::random(), crate::ids::StepId::from("goal-step"));
    let i = TaskInstruction::AddTask {
        attachments: Vec::new(),
        task_id: t.clone(),
        task_name: "Haiku".into(),
        task_intention: "write one".into(),
        requested_by: None,
        goal_step: Some(goal.clone()),
        trace_id: None,
    };
    c.try_apply(&by("m", i), "now").unwrap();
    let task = c.task(&t).unwrap();
    assert_eq!(task.goal_step, Some(goal.clone()));
    use crate::event::trace::TraceId;
    assert_eq!(task.trace_id, Some(TraceId::of("step", "goal-step")));
    // A goal given within a caller's trace (a `traceparent`): the task joins that trace.
    let (t2, caller) = (TaskId::random(), TraceId::of("caller", "x"));
    let i = TaskInstruction::AddTask {
        attachments: Vec::new(),
        task_id: t2.clone(),
        task_name: "Haiku".into(),
        task_intention: "write another".into(),
        requested_by: None,
        goal_step: Some(goal),
        trace_id: Some(caller),
    };
    c.try_apply(&by("m", i), "now").unwrap();
    assert_eq!(c.task(&t2).unwrap().trace_id, Some(caller));
    let json = serde_json::to_value(c.task(&t2).unwrap()).unwrap();
    assert_eq!(
        json["trace_id"],
        caller.to_string(),
        "stored as 32 hex digits"
    );
}

#[test]
fn a_message_of_a_task_travels_in_the_tasks_trace_and_one_of_the_base_task_keeps_its_own() {
    use crate::event::trace::{SpanId, TraceId};
    use crate::event::trace_context::TraceParent;
    let roster: Vec<Member> = ["m", "w"].iter().map(|id| Member::new(*id, "r")).collect();
    let mut c = SyncCore::new(roster, &["m".into()], &[]);
    let t = TaskId::random();
    let i = TaskInstruction::AddTask {
        attachments: Vec::new(),
        task_id: t.clone(),
        task_name: "Haiku".into(),
        task_intention: "write one".into(),
        requested_by: None,
        goal_step: Some("goal".into()),
        trace_id: None,
    };
    c.try_apply(&by("m", i), "now").unwrap();
    let trace = TraceId::of("step", "goal");
    let sender = TraceParent {
        trace: TraceId::of("step", "elsewhere"),
        span: SpanId::of("step", "sender"),
    };
    let mut m = Message::notice(
        t.clone(),
        "w".into(),
        vec!["m".into()],
        StageRef::Stage("s1".into()),
        "done".into(),
    );
    c.place_in_trace(&mut m);
    let stage = SpanId::of("stage", "s1");
    assert_eq!(m.traceparent, Some(TraceParent { trace, span: stage }));
    m.traceparent = Some(sender);
    c.place_in_trace(&mut m);
    let span = sender.span;
    assert_eq!(
        m.traceparent,
        Some(TraceParent { trace, span }),
        "the sender's span kept"
    );
    let mut b = Message::notice(
        c.base_task().clone(),
        "w".into(),
        vec!["m".into()],
        StageRef::NoRelative,
        "hi".into(),
    );
    c.place_in_trace(&mut b);
    assert_eq!(b.traceparent, None);
    b.traceparent = Some(sender);
    c.place_in_trace(&mut b);
    assert_eq!(b.traceparent, Some(sender));
}
