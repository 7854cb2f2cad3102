//! receive_message for LLM agents (SPEC §5): free a wait id, obey a runtime instruction, or
//! turn the message into a reply (`send_message`), a `process_message` step, or, for a manager
//! asked to act (the operator's goal, a runtime notice), a `task_manager` or `decision` step.

use crate::ids::StageRef;
use crate::message::{
    Instruction, Message, OPERATOR, SYNC_STATE_SENDER, TASK_STATE_SENDER, TaskInstruction,
};
use crate::state::{Agent, Executor, ReplyTo, Skill, StepOrigin, StepState};
use crate::texts::Texts;

/// What receiving a message changed besides the agent state itself.
#[derive(Debug, Default)]
pub struct Received {
    /// Steps removed by finish_stage / finish_task, already marked failed, to publish.
    pub dropped: Vec<StepState>,
    /// A message the agent could not act on (a broken instruction), for the log.
    pub problem: Option<String>,
}

/// What a message does to an LLM agent: a reply frees the wait it answers (a late ask_info
/// answer is ignored); a runtime instruction is obeyed (a stage starts or finishes, a task
/// finishes or pauses, ...); any other message becomes a step: a reply owed (`send_message`,
/// ahead of the queue when the sender waits), a manager acting on a notice or goal
/// (`task_manager` or `decision`), or else `process_message`.
pub fn receive_message(agent: &mut Agent, msg: &Message) -> Received {
    let mut out = Received::default();
    // 1. A reply to something we wait for frees that wait id.
    let answers_wait = msg
        .return_waiting_id
        .as_ref()
        .is_some_and(|w| agent.release_wait(w, &msg.sender_id));

    // An ask_info answer whose wait is no longer held arrived after the work that asked was
    // finished: reading it would re-open that closed stage or task.
    if msg.sender_id.as_str() == SYNC_STATE_SENDER && !answers_wait {
        out.problem = Some("ignored an ask_info answer for work that was already finished".into());
        return out;
    }

    // 2. Runtime instructions. Only the runtime itself (SyncState, as `[TaskState]`) gives
    // them, as a typed body; whatever an agent or a person writes is just text, handled below.
    if msg.sender_id.as_str() == TASK_STATE_SENDER
        && let Some(i) = msg.instruction_body()
    {
        out.dropped = apply_instruction(agent, msg, i.clone());
        return out;
    }

    // A goal or a notice for a manager is acted on even when its sender asks for a reply
    // (need_reply is the API's default): a reply alone would leave the goal undone, and the
    // person who gave it is told how its task ended (SPEC §5.3, amended).
    if msg.need_reply && !(acts(msg, answers_wait) && acting_skill(agent, true).is_some()) {
        // 3. A reply is owed.
        queue_reply(agent, msg);
    } else {
        // 4. Nothing owed: digest it, or act on it.
        queue_digest(agent, msg, answers_wait);
    }
    out
}

/// Queues the reply `msg` asks for: a send_message step addressed back to its sender.
fn queue_reply(agent: &mut Agent, msg: &Message) {
    let me = agent.agent_id.clone();
    let sender = &msg.sender_id;
    // If the sender waits, the reply jumps the queue and its `reply_to` carries the wait id it
    // returns (never the text: a wait id is the runtime's, not something the model copies).
    let t = agent.settings.texts.clone();
    let text = format!(
        "{}\n\n{}{}",
        t.reply_heading(sender),
        msg.message,
        attached(msg, &t)
    );
    let wait = msg.wait_id_for(&me).cloned();
    let mut step = new_step(
        agent,
        msg,
        Skill::SendMessage,
        t.reply_intention(sender),
        text,
    )
    .with_origin(StepOrigin::Reply {
        from: sender.clone(),
    });
    step.reply_to = Some(ReplyTo {
        agent_id: sender.clone(),
        wait_id: wait.clone(),
    });
    if wait.is_some() {
        agent.add_next_steps(vec![step]);
    } else {
        agent.add_steps(vec![step]);
    }
}

/// Queues the step that digests (or acts on) `msg`, first when it `answers_wait`.
fn queue_digest(agent: &mut Agent, msg: &Message, answers_wait: bool) {
    let sender = &msg.sender_id;
    // A reply we were waiting for is digested first. A message that asks a manager to act goes
    // straight to the skill that acts on it.
    let act = acts(msg, answers_wait);
    let t = agent.settings.texts.clone();
    let heading = match act {
        true => t.act_heading(sender),
        false => t.digest_heading(sender),
    };
    let text = format!("{heading}\n\n{}{}", msg.message, attached(msg, &t));
    let (skill, intention) = match acting_skill(agent, act) {
        Some(skill) => (skill, acting_intention(msg, &t)),
        None => (Skill::ProcessMessage, t.digest_intention(sender)),
    };
    let origin = if act {
        let notice = msg.notice_body().cloned().map(Box::new);
        StepOrigin::Act {
            from: sender.clone(),
            goal: notice.is_none().then(|| msg.message.clone()),
            attachments: msg.attachments.clone(),
            notice,
            second_try: false,
        }
    } else {
        StepOrigin::Message {
            from: sender.clone(),
        }
    };
    let step = new_step(agent, msg, skill, intention, text).with_origin(origin);
    if answers_wait {
        agent.add_next_steps(vec![step]);
    } else {
        agent.add_steps(vec![step]);
    }
}

/// The lines that list the files a message carries (none: empty).
fn attached(msg: &Message, t: &Texts) -> String {
    crate::attachment::render(
        &t.attached_to_message(crate::attachment::READ_TOOL),
        &msg.attachments,
        t,
    )
}

/// Whether `msg` asks a manager to act: an operator's goal or a runtime notice (not a reply
/// the agent waited for).
fn acts(msg: &Message, answers_wait: bool) -> bool {
    !answers_wait && [TASK_STATE_SENDER, OPERATOR].contains(&msg.sender_id.as_str())
}

/// The title of a step acting on `msg`, as people read it in the console and the CLI.
fn acting_intention(msg: &Message, t: &Texts) -> String {
    match msg.notice_body() {
        Some(n) => t.act_notice_intention(n.headline(t)),
        None => t.act_goal_intention(&msg.sender_id),
    }
}

/// The skill that acts at once on a message asking a manager to act. A runtime notice (a task
/// created, a stage complete, a task to judge, an agent stuck) and an operator's goal call for
/// task_manager actions, so they are a task_manager step: one LLM call instead of
/// process_message → decision → task_manager, and no room for a model to wander (a small model
/// asked to decide on a goal tends to do the work itself). Only a manager that may hire gets a
/// decision step, as it may want to hire before it acts; that step must plan something that
/// acts through the team.
/// `None`: the message is digested by process_message.
fn acting_skill(agent: &Agent, act: bool) -> Option<Skill> {
    let has = |s| agent.skills.contains(&s);
    if !act || !has(Skill::TaskManager) {
        return None;
    }
    Some(if has(Skill::AgentManager) && has(Skill::Decision) {
        Skill::Decision
    } else {
        Skill::TaskManager
    })
}

/// Whether a step handles a message that asks its agent to act: a runtime notice (a task
/// created, a stage complete, a task to judge, an agent stuck) or an operator's goal. Ending
/// such a step without acting would leave the work waiting for ever.
pub fn asks_to_act(step: &StepState) -> bool {
    step.origin.asks_to_act()
}

/// A step acting on a message that asks to act failed (after its re-asks), or SyncState
/// refused its answer (`refused`): a fresh step on the same message, once, carrying the
/// reason (and the refused answer, whose action it is not offered again), so one bad answer
/// never leaves a goal or a notice unanswered for ever. `None` when `step` was that second
/// try already.
pub fn act_again(
    t: &Texts,
    step: &StepState,
    failure: &str,
    refused: Option<TaskInstruction>,
) -> Option<StepState> {
    let origin = step.origin.second_try()?;
    let mut again = StepState::new(
        step.task_id.clone(),
        step.stage_id.clone(),
        step.agent_id.clone(),
        step.executor.clone(),
        t.act_again_intention(),
        t.act_again_text(&step.text_content, failure),
    );
    again.refused_instruction = refused;
    // The same message's work: the same trace, caused by the same sender.
    (again.trace_id, again.caused_by) = (step.trace_id, step.caused_by);
    Some(again.with_origin(origin))
}

fn new_step(
    agent: &Agent,
    msg: &Message,
    skill: Skill,
    intention: String,
    text: String,
) -> StepState {
    let mut step = StepState::new(
        msg.task_id.clone(),
        msg.stage_relative.clone(),
        agent.agent_id.clone(),
        Executor::Skill(skill),
        intention,
        text,
    );
    step.caused_by = msg.traceparent;
    step.choice = msg.choice.clone();
    step
}

fn apply_instruction(agent: &mut Agent, msg: &Message, i: Instruction) -> Vec<StepState> {
    let task = msg.task_id.clone();
    let t = agent.settings.texts.clone();
    match i {
        Instruction::StartStage {
            stage_id,
            task_intention,
            stage_intention,
            goal,
            attachments,
            colleagues,
            colleagues_unlisted,
        } => {
            let mut team = colleagues
                .iter()
                .map(|c| t.colleague_line(&c.agent_id, &c.role, &c.goal))
                .collect::<Vec<_>>()
                .join("\n");
            if colleagues_unlisted > 0 {
                team.push_str(&format!("\n{}", t.more_colleagues(colleagues_unlisted)));
            }
            let text = format!(
                "{}{}",
                t.stage_plan_text(&task_intention, &stage_id, &stage_intention, &goal, team),
                crate::attachment::render(
                    &t.attached_to_task(crate::attachment::READ_TOOL),
                    &attachments,
                    &t
                )
            );
            agent.open_goal(&task, &stage_id);
            let mut step = StepState::new(
                task,
                StageRef::Stage(stage_id.clone()),
                agent.agent_id.clone(),
                Executor::Skill(Skill::Planning),
                t.stage_plan_intention(),
                text,
            )
            .with_origin(StepOrigin::StageStart { stage_id, goal });
            step.caused_by = msg.traceparent;
            agent.add_steps(vec![step]);
            Vec::new()
        }
        Instruction::FinishStage { stage_id } => agent.finish_stage(
            &task,
            &StageRef::Stage(stage_id),
            &t.dropped_stage_finished(),
        ),
        Instruction::FinishTask { task_id } => {
            agent.finish_task(&task_id, &t.dropped_task_finished())
        }
        Instruction::PauseTask { task_id, paused } => {
            agent.set_task_paused(&task_id, paused);
            Vec::new()
        }
        Instruction::UpdateWorkingMemory { task_id, stage_id } => {
            agent.note_working_memory(task_id, stage_id);
            Vec::new()
        }
        Instruction::AddToolDecision { tool_name } => {
            let mut step = StepState::new(
                task,
                msg.stage_relative.clone(),
                agent.agent_id.clone(),
                Executor::Skill(Skill::ToolDecision),
                t.tool_decision_intention(&tool_name),
                t.tool_decision_text(&tool_name),
            )
            .with_origin(StepOrigin::ToolDecision { tool_name });
            step.caused_by = msg.traceparent;
            agent.add_next_steps(vec![step]);
            Vec::new()
        }
    }
}

#[cfg(test)]
mod tests;
