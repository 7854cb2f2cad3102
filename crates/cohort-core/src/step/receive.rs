//! receive_message for LLM agents (SPEC §5): free a wait id, obey a runtime instruction, or
//! turn the message into a reply (`send_message`), a `process_message` step, or, for a manager
//! asked to act (the operator's goal, a runtime notice), a `task_manager` or `decision` step.

use crate::ids::StageRef;
use crate::message::{
    Instruction, Message, OPERATOR, SYNC_STATE_SENDER, TASK_STATE_SENDER, TaskInstruction,
};
use crate::state::{AgentState, Executor, ReplyTo, Skill, StepOrigin, StepState};

/// How a stage's plan step names the agent's goal in it (for the model; the runtime reads the
/// goal from the step's origin).
const GOAL_LINE: &str = "Your goal in this stage: ";

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
pub fn receive_message(agent: &mut AgentState, msg: &Message) -> Received {
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
fn queue_reply(agent: &mut AgentState, msg: &Message) {
    let me = agent.agent_id.clone();
    let sender = &msg.sender_id;
    // If the sender waits, the reply jumps the queue and its `reply_to` carries the wait id it
    // returns (never the text: a wait id is the runtime's, not something the model copies).
    let text = format!(
        "Message from agent `{sender}` (reply to it):\n\n{}{}",
        msg.message,
        attached(msg)
    );
    let wait = msg.wait_id_for(&me).cloned();
    let mut step = new_step(
        agent,
        msg,
        Skill::SendMessage,
        format!("Reply to the message from agent `{sender}`"),
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
fn queue_digest(agent: &mut AgentState, msg: &Message, answers_wait: bool) {
    let sender = &msg.sender_id;
    // A reply we were waiting for is digested first. A message that asks a manager to act goes
    // straight to the skill that acts on it.
    let act = acts(msg, answers_wait);
    let text = format!(
        "{}{}{}",
        digest_heading(sender.as_str(), act),
        msg.message,
        attached(msg)
    );
    let (skill, intention) = match acting_skill(agent, act) {
        Some(skill) => (skill, acting_intention(msg)),
        None => (
            Skill::ProcessMessage,
            format!("Process the message from agent `{sender}`"),
        ),
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
fn attached(msg: &Message) -> String {
    crate::attachment::render("Files attached to this message", &msg.attachments)
}

/// Whether `msg` asks a manager to act: an operator's goal or a runtime notice (not a reply
/// the agent waited for).
fn acts(msg: &Message, answers_wait: bool) -> bool {
    !answers_wait && [TASK_STATE_SENDER, OPERATOR].contains(&msg.sender_id.as_str())
}

/// The title of a step acting on `msg`, as people read it in the console and the CLI.
fn acting_intention(msg: &Message) -> String {
    match msg.notice_body() {
        Some(n) => format!("Act on the notice: {}", n.headline()),
        None => format!("Act on the goal from `{}`", msg.sender_id),
    }
}

/// How a process_message step's text starts: it names the sender, and says so when the
/// message asks the agent to act.
fn digest_heading(sender: &str, act: bool) -> String {
    let asks = if act { ACT_NOTE } else { "" };
    format!("Message from agent `{sender}`{asks}:\n\n")
}

const ACT_NOTE: &str = " (it asks you to act)";

/// The skill that acts at once on a message asking a manager to act. A runtime notice (a task
/// created, a stage complete, a task to judge, an agent stuck) and an operator's goal call for
/// task_manager actions, so they are a task_manager step: one LLM call instead of
/// process_message → decision → task_manager, and no room for a model to wander (a small model
/// asked to decide on a goal tends to do the work itself). Only a manager that may hire gets a
/// decision step, as it may want to hire before it acts; that step must plan something that
/// acts through the team.
/// `None`: the message is digested by process_message.
fn acting_skill(agent: &AgentState, act: bool) -> Option<Skill> {
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

/// The intention of the second try at a message that asks to act.
const ACT_AGAIN: &str = "Act again on the message: my last try failed";

/// A step acting on a message that asks to act failed (after its re-asks), or SyncState
/// refused its answer (`refused`): a fresh step on the same message, once, carrying the
/// reason (and the refused answer, whose action it is not offered again), so one bad answer
/// never leaves a goal or a notice unanswered for ever. `None` when `step` was that second
/// try already.
pub fn act_again(
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
        ACT_AGAIN,
        format!(
            "{}\n\nYour first try at this failed: {failure}\nAct on the message now, with an answer \
             in the required format.",
            step.text_content
        ),
    );
    again.refused_instruction = refused;
    // The same message's work: the same trace, caused by the same sender.
    (again.trace_id, again.caused_by) = (step.trace_id, step.caused_by);
    Some(again.with_origin(origin))
}

fn new_step(
    agent: &AgentState,
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

fn apply_instruction(agent: &mut AgentState, msg: &Message, i: Instruction) -> Vec<StepState> {
    let task = msg.task_id.clone();
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
                .map(|c| format!("- `{}` ({}): {}", c.agent_id, c.role, c.goal))
                .collect::<Vec<_>>()
                .join("\n");
            if colleagues_unlisted > 0 {
                team.push_str(&format!(
                    "\n- … and {colleagues_unlisted} more agents (ask_info stage_profiles lists them all)"
                ));
            }
            let text = format!(
                "A new stage starts and you take part in it. Plan the steps that reach your goal.\n\n\
                 Task intention: {task_intention}\nStage id: {stage_id}\nStage intention: {stage_intention}\n\
                 {GOAL_LINE}{goal}\n\nAgents of this stage (id, role, goal):\n{team}{}",
                crate::attachment::render("Files attached to the task", &attachments)
            );
            agent.open_goal(&task, &stage_id);
            let mut step = StepState::new(
                task,
                StageRef::Stage(stage_id.clone()),
                agent.agent_id.clone(),
                Executor::Skill(Skill::Planning),
                "Plan the steps for my goal in this stage",
                text,
            )
            .with_origin(StepOrigin::StageStart { stage_id, goal });
            step.caused_by = msg.traceparent;
            agent.add_steps(vec![step]);
            Vec::new()
        }
        Instruction::FinishStage { stage_id } => {
            agent.finish_stage(&task, &StageRef::Stage(stage_id), "its stage was finished")
        }
        Instruction::FinishTask { task_id } => agent.finish_task(&task_id, "its task was finished"),
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
                format!("Decide whether and how to go on using `{tool_name}`"),
                format!(
                    "The last call to `{tool_name}` returned; its result is in the tool history."
                ),
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
