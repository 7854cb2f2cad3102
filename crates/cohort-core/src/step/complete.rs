//! Turning a finished LLM call into a step result: interpret the answer with the step's skill,
//! record tokens, and build the `ExecuteOutput` for SyncState. The step stays `running` until
//! SyncState has applied that output (`settle_step`), so "finished" means its effects happened.

use super::ToolAttempts;
use crate::call::ChatReply;
use crate::clock::Now;
use crate::event::StepUpdate;
use crate::ids::{StepId, WaitId};
use crate::message::{
    CompletionUpdate, ExecuteOutput, SharedInfoUpdate, StageAgentUpdate, TaskInstruction,
};
use crate::policy::{Fired, Repair};
use crate::skills;
use crate::state::{
    Agent, Cancelled, Executor, Skill, StageAgentState, StepOrigin, StepResult, StepState,
    TokenUsage,
};
use crate::texts::Texts;

/// What finishing a step's LLM call produced.
#[derive(Debug)]
pub struct StepCompletion {
    /// For SyncState; sent whether the step succeeded or failed (a failure updates the stage).
    pub output: ExecuteOutput,
    /// Why the step failed, if it did.
    pub failure: Option<String>,
    /// Wait ids this step put on the step lock, to take back if SyncState refuses the message.
    pub added_waits: Vec<WaitId>,
}

impl StepCompletion {
    /// The step left the agent while its call ran (nothing to record, nothing to apply).
    pub(super) fn vanished() -> Self {
        StepCompletion {
            output: ExecuteOutput::default(),
            failure: Some("step vanished".into()),
            added_waits: vec![],
        }
    }
}

/// What an LLM answer made of its step: the step's end, or (while re-asks are left) the
/// reason to ask the model again, the answer it gave and what it cost.
#[derive(Debug)]
// The step's end is the common case and is moved once; boxing it would cost every step an
// allocation to save bytes on the rare re-ask.
#[allow(clippy::large_enum_variant)]
pub enum Completion {
    /// The step ended, finished or failed, with what goes to SyncState.
    Done(StepCompletion),
    /// The answer was unusable and may be asked about again; the step is still running.
    AskAgain {
        /// What is wrong with the answer, told to the model.
        error: String,
        /// The model's answer, shown back to it.
        answer: String,
        /// The rule the re-ask is a firing of: `reask`, or `echo` for an answer that only
        /// handed back its instruction or goal.
        rule: Repair,
    },
}

/// Interprets the answer to a step's LLM call. An answer the skill cannot use ends the step
/// as failed, unless `may_ask_again`: then nothing of the step changes but its tokens, and
/// the caller asks the model again with the error (`super::reask`).
pub fn complete_step(
    agent: &mut Agent,
    step_id: &StepId,
    mut reply: Result<ChatReply, String>,
    now: Now,
    may_ask_again: bool,
) -> Completion {
    let Some(step) = agent.agent_step.get(step_id).cloned() else {
        return Completion::Done(StepCompletion::vanished());
    };
    // Held apart from the agent, which the answer changes.
    let settings = agent.settings.clone();
    let mut output = ExecuteOutput {
        agent_id: Some(agent.agent_id.clone()),
        task_id: Some(step.task_id.clone()),
        ..Default::default()
    };
    if let Ok(reply) = &reply {
        agent.add_tokens(reply.usage);
        agent.update_step(
            step_id,
            StepUpdate {
                token_usage: Some(reply.usage),
                ..Default::default()
            },
        );
        output.token_usage = Some((step.task_id.clone(), reply.usage));
    }
    let lock_before: Vec<WaitId> = agent.step_lock.ids().cloned().collect();
    let mut stage_state = StageAgentState::Working;
    let answered = reply.is_ok();
    let mut fired = Vec::new();
    if let Ok(r) = &mut reply {
        crate::call::repairs::mend_reply(&settings.repairs, r, &mut fired, &settings.texts);
    }
    let (mut result, failure) = match reply {
        // Its stage or task ended while the LLM answered: acting on the answer would re-open
        // closed work, so the answer is kept for the record and nothing else happens.
        _ if !agent.holds(&step.task_id, &step.stage_id) => (
            set_aside(&settings.texts),
            Some(settings.texts.step_set_aside()),
        ),
        Err(e) => {
            stage_state = StageAgentState::Failed;
            (StepResult::failed(e.clone()), Some(e))
        }
        Ok(reply) => match read_answer(agent, &step, reply, now, may_ask_again, &mut output) {
            Ok(read) => {
                stage_state = read.state;
                fired.extend(read.repairs);
                (read.result, read.failure)
            }
            Err((error, answer, rule)) => {
                return Completion::AskAgain {
                    error,
                    answer,
                    rule,
                };
            }
        },
    };
    output.repairs.extend(fired.iter().map(|f| f.rule));
    result.repairs.extend(fired);
    agent.update_step(step_id, result_update(result));
    if let Some(f) = &failure
        && let FollowUp::Close(closing) = follow_up(agent, &step, f, None, answered)
    {
        output.task_instruction = Some(closing);
        output.repairs.push(Repair::RuntimeClosing);
    }
    Completion::Done(finish_output(
        agent,
        &step,
        stage_state,
        failure,
        output,
        &lock_before,
        true,
    ))
}

/// What reading an answer gave: the step's result, why it failed if it did, the agent's state
/// in the stage and the repairs made.
struct Read {
    result: StepResult,
    failure: Option<String>,
    state: StageAgentState,
    repairs: Vec<Fired>,
}

/// An answer read by its skill (repaired where the policy allows, once the re-asks are spent):
/// the step's result, why it failed if it did, the agent's state in the stage and the repairs
/// made; `Err` with the error and the answer to ask again about, when the answer is unusable
/// and may be asked about.
fn read_answer(
    agent: &mut Agent,
    step: &StepState,
    reply: ChatReply,
    now: Now,
    may_ask_again: bool,
    output: &mut ExecuteOutput,
) -> Result<Read, (String, String, Repair)> {
    let interpreted = match skills::interpret(agent, step, &reply.text, now) {
        Err(e) if may_ask_again && !matches!(e, skills::SkillError::NoTools(_)) => {
            let rule = match e {
                skills::SkillError::Echo(_) => Repair::Echo,
                _ => Repair::Reask,
            };
            return Err((
                unusable(&e, reply.cut, &agent.settings.texts),
                reply.text,
                rule,
            ));
        }
        // Its re-asks spent: what the runtime can do in the skill's place, it does.
        Err(e) => skills::repair(agent, step, &e).ok_or(e),
        interpreted => interpreted,
    };
    Ok(match interpreted {
        Ok(o) => {
            let (result, state, repairs) = take_outcome(agent, step, o, output);
            Read {
                result,
                failure: None,
                state,
                repairs,
            }
        }
        Err(e) => {
            let t = &agent.settings.texts;
            let reason = t.step_failed(&step.executor, unusable(&e, reply.cut, t));
            let result = StepResult {
                answer: Some(reply.text.into()),
                ..StepResult::failed(reason.clone())
            };
            Read {
                result,
                failure: Some(reason),
                state: StageAgentState::Failed,
                repairs: Vec::new(),
            }
        }
    })
}

/// What a skill made of an answer goes where it belongs: its instructions, message, query and
/// completion summary into the step's output for SyncState; its result, the agent's state in
/// the stage and the repairs made on the way back to the step.
fn take_outcome(
    agent: &Agent,
    step: &StepState,
    o: skills::SkillOutcome,
    output: &mut ExecuteOutput,
) -> (StepResult, StageAgentState, Vec<Fired>) {
    output.send_message = o.send_message;
    output.task_instruction = o.task_instruction;
    output.agent_instruction = o.agent_instruction;
    output.ask_info = o.ask_info;
    if let (Some(c), Some(stage)) = (o.completion, step.stage_id.stage()) {
        output.update_stage_agent_completion = Some(CompletionUpdate {
            task_id: step.task_id.clone(),
            stage_id: stage.clone(),
            agent_id: agent.agent_id.clone(),
            completion_summary: c.summary,
            results: c.results,
            written: c.written,
        });
    }
    (StepResult::output(o.result), o.stage_state, o.repairs)
}

/// What follows a failed (or refused) step that acted on a goal or a notice.
#[derive(Debug, PartialEq)]
pub enum FollowUp {
    /// A second try is queued next.
    Again,
    /// The second try failed too: the runtime closes the work in the manager's place with this
    /// instruction (see `skills::closing`), recorded in the step's result.
    Close(TaskInstruction),
    /// Nothing more: the step stays failed (its work ended, a repair is off, or the model
    /// never answered).
    Nothing,
}

/// A step acting on a goal or notice failed with `reason` (or SyncState refused its
/// instruction, `refused`): a second try, once (`act_again`); after a failed second try the
/// runtime's closing, when the model `answered` (its answers were unusable or refused):
/// nothing would act on that message again otherwise, and its task would wait for ever. A
/// model that did not answer at all (an endpoint down) closes nothing: a few minutes of outage
/// must not end work for good; the task waits, and the failed steps say why.
fn follow_up(
    agent: &mut Agent,
    step: &StepState,
    reason: &str,
    refused: Option<TaskInstruction>,
    answered: bool,
) -> FollowUp {
    if !agent.holds(&step.task_id, &step.stage_id) {
        return FollowUp::Nothing;
    }
    let allows = |rule| agent.settings.repairs.allows(rule);
    if allows(Repair::SecondTry)
        && let Some(again) = super::receive::act_again(&agent.settings.texts, step, reason, refused)
    {
        let what = agent.settings.texts.repair_second_try(&again.step_id);
        agent.add_next_steps(vec![again]);
        note_repair(agent, &step.step_id, Fired::new(Repair::SecondTry, what));
        return FollowUp::Again;
    }
    if !answered || !step.origin.is_second_try() || !allows(Repair::RuntimeClosing) {
        return FollowUp::Nothing;
    }
    let Some(closing) = skills::closing(agent, step, reason) else {
        return FollowUp::Nothing;
    };
    let what = agent
        .settings
        .texts
        .repair_runtime_closing(serde_json::to_string(&closing).unwrap_or_default());
    note_repair(
        agent,
        &step.step_id,
        Fired::new(Repair::RuntimeClosing, what),
    );
    FollowUp::Close(closing)
}

/// Records one firing of a repair rule on a step that already has its result.
fn note_repair(agent: &mut Agent, step_id: &StepId, fired: Fired) {
    let Some(step) = agent.agent_step.get(step_id) else {
        return;
    };
    let mut result = step.execute_result.clone().unwrap_or_default();
    result.repairs.push(fired);
    agent.update_step(step_id, result_update(result));
}

/// A step that did its part but whose output SyncState refused (an instruction that cannot
/// run, such as a stage the task already finished): when it was acting on a goal or a notice,
/// a fresh step on the same message, carrying the refusal, goes in next, as for a failed
/// answer (`barred`: the same action cannot help, so the second try is not offered it); after
/// a refused second try, the runtime's closing (for the actor to hand to SyncState).
pub fn act_again_after_refusal(
    agent: &mut Agent,
    step_id: &StepId,
    reason: &str,
    barred: bool,
) -> FollowUp {
    let Some(step) = agent.agent_step.get(step_id).cloned() else {
        return FollowUp::Nothing;
    };
    let refused = step
        .execute_result
        .as_ref()
        .filter(|_| barred)
        .and_then(|r| r.read::<crate::skills::Instructed>())
        .map(|i| i.task_instruction);
    follow_up(agent, &step, reason, refused, true)
}

/// The result of a step set aside because its work ended under it: it closes `cancelled`, not
/// `failed` (the agent did nothing wrong), with the reason (`step_set_aside`: why it changes
/// nothing).
fn set_aside(t: &Texts) -> StepResult {
    StepResult {
        cancelled: Some(Cancelled {
            by: None,
            reason: t.step_set_aside_brief(),
        }),
        ..StepResult::failed(t.step_set_aside())
    }
}

/// What every ending of a step starts from: the step, an empty output from this agent, and
/// the waits the agent held before (to tell which ones the step took).
pub(super) fn opening(
    agent: &Agent,
    step_id: &StepId,
) -> Option<(StepState, ExecuteOutput, Vec<WaitId>)> {
    let step = agent.agent_step.get(step_id).cloned()?;
    let output = ExecuteOutput {
        agent_id: Some(agent.agent_id.clone()),
        task_id: Some(step.task_id.clone()),
        ..Default::default()
    };
    Some((step, output, agent.step_lock.ids().cloned().collect()))
}

/// A step a limit stops before it runs (see `step::limits`): it fails with `reason`, and
/// when it leaves the agent nothing to run in the stage, the manager is told at once (a
/// decision of the agent's own would run into the same limit).
pub fn stop_step(agent: &mut Agent, step_id: &StepId, reason: String) -> StepCompletion {
    let Some((step, output, lock_before)) = opening(agent, step_id) else {
        return StepCompletion::vanished();
    };
    agent.update_step(step_id, result_update(StepResult::failed(reason.clone())));
    finish_output(
        agent,
        &step,
        StageAgentState::Failed,
        Some(reason),
        output,
        &lock_before,
        false,
    )
}

/// A tool step's result (`execute_result` holds the server's full answer, or the reason it
/// failed). A tool_decision step goes in right after it, so the agent decides how to go on —
/// also after a failure, whose reason the decision then sees.
pub fn complete_tool_step(
    agent: &mut Agent,
    step_id: &StepId,
    result: Result<serde_json::Value, String>,
) -> StepCompletion {
    complete_tool_step_after(agent, step_id, result, ToolAttempts::default())
}

/// [`complete_tool_step`] for a call that took more than one try: the tries made again after
/// a passing failure and the repairs made on the way are kept on the step.
pub fn complete_tool_step_after(
    agent: &mut Agent,
    step_id: &StepId,
    result: Result<serde_json::Value, String>,
    attempts: ToolAttempts,
) -> StepCompletion {
    let Some((step, output, lock_before)) = opening(agent, step_id) else {
        return StepCompletion::vanished();
    };
    let (mut value, failure, stage_state) = match result {
        _ if !agent.holds(&step.task_id, &step.stage_id) => (
            set_aside(&agent.settings.texts),
            Some(agent.settings.texts.step_set_aside()),
            StageAgentState::Working,
        ),
        Ok(v) => (StepResult::output(v), None, StageAgentState::Working),
        // A failed call is a result the agent handles (the tool_decision after it sees why),
        // not a failure of the agent in its stage.
        Err(e) => (
            StepResult::failed(e.clone()),
            Some(e),
            StageAgentState::Working,
        ),
    };
    value.tool_retries = attempts.retries;
    value.repairs.extend(attempts.repairs);
    agent.update_step(step_id, result_update(value));
    if agent.holds(&step.task_id, &step.stage_id) {
        let t = &agent.settings.texts;
        let (server, intention) = (&step.executor, &step.step_intention);
        let text = match &failure {
            Some(_) => t.tool_failed_text(server, intention),
            None => t.tool_returned_text(server, intention),
        };
        let decision = StepState::new(
            step.task_id.clone(),
            step.stage_id.clone(),
            agent.agent_id.clone(),
            Executor::Skill(Skill::ToolDecision),
            t.tool_decided_intention(server),
            text,
        )
        .with_origin(StepOrigin::ToolDecision {
            tool_name: step.executor.to_string(),
        });
        agent.add_next_steps(vec![decision]);
    }
    finish_output(
        agent,
        &step,
        stage_state,
        failure,
        output,
        &lock_before,
        true,
    )
}

/// A tool step run as a native tool loop, at its end: the model's answer (or why the loop
/// failed) and what all its LLM calls cost. The loop decided how to go on itself, so no
/// tool_decision follows.
pub fn complete_tool_loop(
    agent: &mut Agent,
    step_id: &StepId,
    result: Result<serde_json::Value, String>,
    usage: TokenUsage,
) -> StepCompletion {
    let Some((step, mut output, lock_before)) = opening(agent, step_id) else {
        return StepCompletion::vanished();
    };
    agent.add_tokens(usage);
    if usage != TokenUsage::default() {
        output.token_usage = Some((step.task_id.clone(), usage));
    }
    let (value, failure) = match result {
        _ if !agent.holds(&step.task_id, &step.stage_id) => (
            set_aside(&agent.settings.texts),
            Some(agent.settings.texts.step_set_aside()),
        ),
        Ok(v) => (StepResult::output(v), None),
        Err(e) => (StepResult::failed(e.clone()), Some(e)),
    };
    let mut update = result_update(value);
    update.token_usage = Some(usage);
    agent.update_step(step_id, update);
    let state = if failure.is_some() {
        StageAgentState::Failed
    } else {
        StageAgentState::Working
    };
    finish_output(agent, &step, state, failure, output, &lock_before, true)
}

/// The part every step shares once its result is recorded: the agent's state in the stage
/// (and whether it is stuck there), the shared-info line, and the waits it took.
pub(super) fn finish_output(
    agent: &mut Agent,
    step: &StepState,
    stage_state: StageAgentState,
    failure: Option<String>,
    mut output: ExecuteOutput,
    lock_before: &[WaitId],
    may_recover: bool,
) -> StepCompletion {
    // A second try is counted as its task's repair once it ran (it is recorded on the step it
    // followed when queued).
    if step.origin.is_second_try() {
        output.repairs.push(Repair::SecondTry);
    }
    // A graph plan's steps that wait for this one cannot run if it failed.
    if let Some(f) = &failure {
        super::dependencies::fail_dependents(agent, step, f);
    }
    let open = agent.holds(&step.task_id, &step.stage_id);
    if let (Some(stage), true) = (step.stage_id.stage(), open) {
        let goal = (step.task_id.clone(), stage.clone());
        if stage_state == StageAgentState::Finished {
            agent.close_goal(&goal.0, &goal.1);
        }
        let mut stuck = None;
        if agent.open_goals.contains(&goal) && nothing_left_in_stage(agent, step) {
            match &failure {
                // A failure with nothing left to run: the agent decides how to go on itself,
                // once; if that decision fails too, the manager must decide.
                Some(f)
                    if may_recover
                        && agent.skills.contains(&Skill::Decision)
                        && !step.origin.is_recovery() =>
                {
                    add_recovery_decision(agent, step, f)
                }
                Some(f) => stuck = Some(f.clone()),
                // The plan ran dry without a summary: look back before giving up the stage.
                None => add_closing_reflection(agent, step),
            }
        }
        output.update_stage_agent_state = Some(StageAgentUpdate {
            task_id: step.task_id.clone(),
            stage_id: stage.clone(),
            agent_id: agent.agent_id.clone(),
            state: stage_state,
            stuck,
        });
    }
    output.send_shared_info = Some(shared_info(agent, step, failure.is_none()));
    let added_waits = agent
        .step_lock
        .ids()
        .filter(|w| !lock_before.contains(w))
        .cloned()
        .collect();
    StepCompletion {
        output,
        failure,
        added_waits,
    }
}

/// No step of this stage is queued, the agent waits for no reply in it, and the step did
/// not leave a plan waiting for a person's check (the plan is what comes next).
pub(super) fn nothing_left_in_stage(agent: &Agent, step: &StepState) -> bool {
    let queued = agent
        .agent_step
        .todo()
        .filter_map(|id| agent.agent_step.get(id))
        .any(|s| same_work(s, step));
    let plan_waits = agent
        .agent_step
        .get(&step.step_id)
        .and_then(|s| s.execute_result.as_ref())
        .is_some_and(|r| r.get(super::plan_check::KEY).is_some());
    !queued && !plan_waits && !agent.step_lock.holds_in(&step.task_id, &step.stage_id)
}

fn same_work(a: &StepState, b: &StepState) -> bool {
    a.task_id == b.task_id && a.stage_id == b.stage_id
}

/// The decision an agent gets when a failure left it nothing to run.
fn add_recovery_decision(agent: &mut Agent, step: &StepState, failure: &str) {
    let t = &agent.settings.texts;
    let s = StepState::new(
        step.task_id.clone(),
        step.stage_id.clone(),
        agent.agent_id.clone(),
        Executor::Skill(Skill::Decision),
        t.recovery_intention(),
        t.recovery_text(&step.executor, &step.step_intention, failure),
    )
    .with_origin(StepOrigin::Recovery {
        after: step.step_id.clone(),
    });
    agent.add_next_steps(vec![s]);
}

pub(super) fn add_closing_reflection(agent: &mut Agent, step: &StepState) {
    let s = StepState::new(
        step.task_id.clone(),
        step.stage_id.clone(),
        agent.agent_id.clone(),
        Executor::Skill(Skill::Reflection),
        agent.settings.texts.closing_reflection_intention(),
        agent.settings.texts.closing_reflection_text(),
    )
    .with_origin(StepOrigin::ClosingReflection);
    agent.add_steps(vec![s]);
}

/// Why an answer could not be used; an answer that was cut short says why.
fn unusable(
    e: &skills::SkillError,
    cut: Option<crate::call::Cut>,
    t: &crate::texts::Texts,
) -> String {
    let error = e.render(t);
    match cut {
        Some(crate::call::Cut::TokenLimit) => t.cut_token_limit(error),
        Some(crate::call::Cut::Repetition) => t.cut_repetition(error),
        None => error,
    }
}

pub(super) fn result_update(result: StepResult) -> StepUpdate {
    StepUpdate {
        execute_result: Some(Box::new(result)),
        ..Default::default()
    }
}

fn shared_info(agent: &Agent, step: &StepState, ok: bool) -> SharedInfoUpdate {
    SharedInfoUpdate {
        task_id: step.task_id.clone(),
        stage_id: step.stage_id.clone(),
        agent_id: agent.agent_id.clone(),
        role: agent.role.clone(),
        content: if ok {
            agent
                .settings
                .texts
                .shared_step_finished(&step.executor, &step.step_intention)
        } else {
            agent
                .settings
                .texts
                .shared_step_failed(&step.executor, &step.step_intention)
        },
    }
}

#[cfg(test)]
mod tests;
