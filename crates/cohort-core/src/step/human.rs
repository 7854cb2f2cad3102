//! The human agent (SPEC §9): what receiving a message means for a person (it lands in their
//! private conversation; a message needing a reply raises a notice, with the wait id kept so
//! the answer can return it), and what the person's own sending does (one message per
//! receiver, each answering that receiver's pending wait, recorded as a finished step).

use crate::clock::Now;
use crate::ids::{AgentId, StageRef, TaskId, WaitId};
use crate::message::{Instruction, Message, TASK_STATE_SENDER};
use crate::state::{
    Agent, AgentState, Executor, PrivateMessage, Skill, StepExecutionState, StepOrigin, StepResult,
    StepState,
};
use crate::state::{Ask, AskError};
use serde::Serialize;
use serde_json::json;

/// What a person sends (made from the body of `POST /api/send_message`, whose wire shape and
/// defaults are `api::human::SendBody`'s).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HumanMessage {
    /// The task the message belongs to.
    pub task_id: TaskId,
    /// Who gets it; one message goes to each (repeats dropped).
    pub receiver: Vec<AgentId>,
    /// The text; to a receiver that asked a question, it must be an answer that fits it.
    pub content: String,
    /// The stage it is about, if any.
    pub stage_relative: StageRef,
    /// Whether the receivers are to reply.
    pub need_reply: bool,
    /// Whether the person waits for the replies (a wait id per receiver).
    pub waiting: bool,
    /// With `waiting`: how long to wait for the reply, in seconds (default: the team's
    /// `waits.agent_secs` or `waits.human_secs`, by receiver).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_secs: Option<u64>,
    /// The caller's trace context (the request's W3C `traceparent` header): the work the
    /// message causes joins the caller's trace.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<crate::event::trace_context::TraceParent>,
    /// Files the person attached, as the store keeps them; each receiver gets them all.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<crate::attachment::Attachment>,
    /// The model and MCP servers chosen for the receivers' work on it (checked against each
    /// receiver before it is sent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub choice: Option<crate::state::Choice>,
}

pub use crate::config::MAX_WAIT_SECS;

/// Why a person's message was refused; nothing of it was sent or recorded. Its text
/// ([`HumanError::render`], in the team's language) is what the REST API answers.
#[derive(Debug, PartialEq)]
pub enum HumanError {
    /// The sender is an LLM agent, not a person.
    NotHuman(AgentId),
    /// The message names no receiver.
    NoReceiver,
    /// The text is empty or blank.
    Empty,
    /// The person is among the receivers.
    ToSelf,
    /// `wait_secs` is 0 or more than [`MAX_WAIT_SECS`].
    BadWait,
    /// More files than one message may carry.
    Attachments(crate::attachment::AttachmentError),
    /// A receiver asked the person a question, and the text is not an answer its form takes.
    BadAnswer {
        /// The receiver that asked.
        to: AgentId,
        /// How the answer does not fit.
        why: AskError,
    },
}

impl HumanError {
    /// The refusal, in the language of `t`.
    pub fn render(&self, t: &crate::texts::Texts) -> String {
        match self {
            HumanError::NotHuman(agent) => t.human_not_human(agent),
            HumanError::NoReceiver => t.human_no_receiver(),
            HumanError::Empty => t.human_empty(),
            HumanError::ToSelf => t.human_to_self(),
            HumanError::BadWait => t.human_bad_wait(MAX_WAIT_SECS),
            HumanError::Attachments(e) => e.render(t),
            HumanError::BadAnswer { to, why } => t.human_bad_answer(to, why.render(t)),
        }
    }
}

/// In English, as logs show it.
impl std::fmt::Display for HumanError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&crate::texts::Texts::english()))
    }
}

impl std::error::Error for HumanError {}

/// receive_message for a human agent, at `now` (the record's timestamp) and `now_ms` (from
/// which a waiting sender's deadline is told: it waits `waits.human_secs` for a person).
pub fn receive_as_human(
    agent: &mut Agent,
    msg: &Message,
    now: &str,
    now_ms: i64,
) -> Vec<StepState> {
    if let Some(w) = &msg.return_waiting_id {
        agent.release_wait(w, &msg.sender_id);
    }
    if msg.sender_id.as_str() == TASK_STATE_SENDER {
        if let Some(i) = msg.instruction_body() {
            return obey(agent, msg, i.clone());
        }
        // A notice for a person (a task they asked for ended or stalled) is a notice, not a
        // chat to answer.
        if let Some(n) = msg.notice_body() {
            agent.state.add_notice(n.render(&agent.settings.texts));
            return Vec::new();
        }
    }
    let me = agent.agent_id.clone();
    let wait = msg.wait_id_for(&me).cloned();
    let entry = PrivateMessage {
        task_id: msg.task_id.clone(),
        sender_id: msg.sender_id.clone(),
        content: msg.message.clone(),
        stage_relative: msg.stage_relative.clone(),
        timestamp: now.to_owned(),
        need_reply: msg.need_reply,
        waiting: wait.is_some(),
        return_waiting_id: wait.clone(),
        replied: false,
        ask: msg.ask.clone(),
        reply_by_ms: wait.as_ref().map(|_| {
            let patience =
                i64::try_from(agent.settings.wait_patience.human.as_millis()).unwrap_or(i64::MAX);
            now_ms.saturating_add(patience)
        }),
        attachments: msg.attachments.clone(),
    };
    let sender = msg.sender_id.clone();
    agent.add_private(&sender, entry);
    if msg.need_reply {
        let t = agent.settings.texts.clone();
        let mut notice = match wait {
            Some(_) => t.person_waited_for(&sender, &msg.task_id),
            None => t.person_asked(&sender, &msg.task_id),
        };
        if let Some(ask) = &msg.ask {
            notice.push(' ');
            notice.push_str(&ask.describe(&t));
        }
        agent.add_notice(notice);
    }
    Vec::new()
}

fn obey(agent: &mut Agent, msg: &Message, i: Instruction) -> Vec<StepState> {
    let note = |agent: &mut Agent, text: String| agent.add_notice(text);
    let t = agent.settings.texts.clone();
    match i {
        Instruction::StartStage {
            stage_id,
            stage_intention,
            goal,
            ..
        } => {
            agent.note_working_memory(msg.task_id.clone(), Some(StageRef::Stage(stage_id.clone())));
            note(
                agent,
                t.person_stage_starts(&stage_id, &msg.task_id, stage_intention, goal),
            );
            Vec::new()
        }
        Instruction::FinishStage { stage_id } => {
            note(agent, t.person_stage_finished(&stage_id, &msg.task_id));
            agent.finish_stage(
                &msg.task_id,
                &StageRef::Stage(stage_id),
                &t.dropped_stage_finished(),
            )
        }
        Instruction::FinishTask { task_id } => {
            note(agent, t.person_task_finished(&task_id));
            agent.finish_task(&task_id, &t.dropped_task_finished())
        }
        Instruction::PauseTask { task_id, paused } => {
            let said = match paused {
                true => t.person_task_paused(&task_id),
                false => t.person_task_resumed(&task_id),
            };
            note(agent, said);
            Vec::new()
        }
        Instruction::UpdateWorkingMemory { task_id, stage_id } => {
            agent.note_working_memory(task_id, stage_id);
            Vec::new()
        }
        Instruction::AddToolDecision { .. } => Vec::new(),
    }
}

/// What a person's send becomes: one message per receiver (each answers that receiver's
/// oldest unanswered waiting message, if any), recorded in the private conversations and as a
/// finished send_message step. With `waiting`, the person holds a wait id per receiver.
pub fn human_send(
    agent: &mut Agent,
    m: &HumanMessage,
    now: &Now,
) -> Result<Vec<Message>, HumanError> {
    let receivers = check_send(agent, m)?;
    // Each receiver's question, if they asked one, takes only an answer that fits it; all
    // are checked before anything is recorded.
    let contents = receivers
        .iter()
        .map(|r| match pending_ask(agent, r, &m.task_id) {
            Some(ask) => ask
                .answer(&m.content)
                .map_err(|why| HumanError::BadAnswer { to: r.clone(), why }),
            None => Ok(m.content.clone()),
        })
        .collect::<Result<Vec<String>, HumanError>>()?;
    let mut out = Vec::new();
    for (r, content) in receivers.into_iter().zip(contents) {
        out.push(send_to(agent, m, r, content, now));
    }
    record_send(agent, m, &out);
    Ok(out)
}

/// The receivers of a person's send (each once, in order), or why the send is refused.
fn check_send(agent: &Agent, m: &HumanMessage) -> Result<Vec<AgentId>, HumanError> {
    if agent.human_config.is_none() {
        return Err(HumanError::NotHuman(agent.agent_id.clone()));
    }
    if m.wait_secs.is_some_and(|s| s == 0 || s > MAX_WAIT_SECS) {
        return Err(HumanError::BadWait);
    }
    if m.content.trim().is_empty() {
        return Err(HumanError::Empty);
    }
    if m.attachments.len() > crate::attachment::MOST_ATTACHMENTS_PER_MESSAGE {
        return Err(HumanError::Attachments(
            crate::attachment::AttachmentError::TooMany(m.attachments.len()),
        ));
    }
    let mut receivers: Vec<AgentId> = Vec::new();
    for r in &m.receiver {
        if !receivers.contains(r) {
            receivers.push(r.clone());
        }
    }
    if receivers.is_empty() {
        return Err(HumanError::NoReceiver);
    }
    if receivers.contains(&agent.agent_id) {
        return Err(HumanError::ToSelf);
    }
    Ok(receivers)
}

/// Sends `content` to `r` (answering its pending message, waiting if asked) and records it.
fn send_to(agent: &mut Agent, m: &HumanMessage, r: AgentId, content: String, now: &Now) -> Message {
    let answers = answer_pending(agent, &r, &m.task_id);
    let wait = m.waiting.then(WaitId::random);
    if let Some(w) = &wait {
        agent.hold_waits(
            vec![(w.clone(), r.clone())],
            &m.task_id,
            &m.stage_relative,
            now.unix_ms,
            m.wait_secs.map(std::time::Duration::from_secs),
        );
    }
    let message = Message {
        task_id: m.task_id.clone(),
        sender_id: agent.agent_id.clone(),
        receiver: vec![r.clone()],
        message: content.clone(),
        stage_relative: m.stage_relative.clone(),
        need_reply: m.need_reply || wait.is_some(),
        waiting: wait.map(|w| vec![w]),
        return_waiting_id: answers,
        ask: None,
        body: None,
        traceparent: m.traceparent,
        attachments: m.attachments.clone(),
        choice: m.choice.clone().filter(|c| !c.is_empty()).map(Box::new),
    };
    agent.add_private(
        &r,
        PrivateMessage {
            task_id: m.task_id.clone(),
            sender_id: agent.agent_id.clone(),
            content,
            stage_relative: m.stage_relative.clone(),
            timestamp: now.stamp(),
            need_reply: message.need_reply,
            waiting: message.waiting.is_some(),
            return_waiting_id: message.return_waiting_id.clone(),
            replied: false,
            ask: None,
            reply_by_ms: None,
            attachments: m.attachments.clone(),
        },
    );
    message
}

/// Records a person's send (`sent`) as a finished send_message step; it never runs.
fn record_send(agent: &mut Agent, m: &HumanMessage, sent: &[Message]) {
    let mut step = StepState::new(
        m.task_id.clone(),
        m.stage_relative.clone(),
        agent.agent_id.clone(),
        Executor::Skill(Skill::SendMessage),
        agent.settings.texts.person_sent_intention(),
        m.content.clone(),
    )
    .with_origin(StepOrigin::Person);
    step.execution_state = StepExecutionState::Finished;
    step.execute_result = Some(StepResult::output(json!({ "send_message": sent })));
    agent.add_done(step);
}

/// The question of the oldest unanswered message from `from` in `task`, the one a send to
/// `from` answers (see `answer_pending`), if it carries one.
fn pending_ask<'a>(agent: &'a AgentState, from: &AgentId, task: &TaskId) -> Option<&'a Ask> {
    pending(agent, from, task)?.1.ask.as_ref()
}

/// The oldest message from `from` in `task` that needs the person's reply and has none yet,
/// with its place in their conversation.
fn pending<'a>(
    agent: &'a AgentState,
    from: &AgentId,
    task: &TaskId,
) -> Option<(usize, &'a PrivateMessage)> {
    agent
        .conversation_pool
        .as_ref()?
        .conversation_privates
        .get(from)?
        .iter()
        .enumerate()
        .find(|(_, p)| &p.sender_id == from && &p.task_id == task && p.need_reply && !p.replied)
}

/// Marks the oldest unanswered message from `from` in `task` that needed a reply as answered,
/// returning its wait id if its sender waits.
fn answer_pending(agent: &mut Agent, from: &AgentId, task: &TaskId) -> Option<WaitId> {
    let (index, pending) = pending(agent, from, task)?;
    let wait = pending.return_waiting_id.clone();
    agent.mark_replied(from, index);
    wait
}

/// Whether a person's send `m` gives the team a goal: a message in the base task `base` that
/// answers nothing any of its receivers asked (what seed 000 §10.3's caps count).
pub fn gives_a_goal(agent: &AgentState, m: &HumanMessage, base: &TaskId) -> bool {
    &m.task_id == base && m.receiver.iter().all(|r| pending(agent, r, base).is_none())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::ConversationPool;
    use crate::state::HumanConfig;

    fn human() -> Agent {
        let mut a = Agent::from(AgentState::new(
            "op".into(),
            "Op".into(),
            "operator".into(),
            "".into(),
        ));
        a.human_config = Some(HumanConfig {
            display_name: "Op".into(),
        });
        a.conversation_pool = Some(ConversationPool::default());
        a
    }

    fn from(sender: &str, text: &str) -> Message {
        Message::notice(
            "t".into(),
            sender.into(),
            vec!["op".into()],
            StageRef::NoRelative,
            text.into(),
        )
    }

    #[test]
    fn a_chat_of_long_messages_is_held_to_its_bytes_and_keeps_the_newest() {
        let mut h = human();
        h.settings_mut().private_bytes = 100 << 10;
        for i in 0..100 {
            receive_as_human(
                &mut h,
                &from("m", &format!("{i:03}{}", "x".repeat(16_000))),
                "now",
                0,
            );
        }
        let chat =
            &h.conversation_pool.as_ref().unwrap().conversation_privates[&AgentId::from("m")];
        let held: usize = chat.iter().map(crate::state::Held::held_bytes).sum();
        assert!(held <= 100 << 10, "{held} bytes in {} messages", chat.len());
        assert!(chat.len() >= 4, "{}", chat.len());
        assert!(chat.last().unwrap().content.starts_with("099"));
    }

    #[test]
    fn a_message_in_the_base_task_is_a_goal_unless_it_answers_a_question() {
        let mut h = human();
        let to_m = |task: &str| HumanMessage {
            choice: None,
            attachments: Vec::new(),
            task_id: task.into(),
            receiver: vec!["m".into()],
            content: "do it".into(),
            stage_relative: StageRef::NoRelative,
            need_reply: true,
            waiting: false,
            wait_secs: None,
            traceparent: None,
        };
        let base = TaskId::from("t");
        assert!(gives_a_goal(&h, &to_m("t"), &base));
        assert!(
            !gives_a_goal(&h, &to_m("other"), &base),
            "work inside a task"
        );
        let mut q = from("m", "which colour?");
        q.need_reply = true;
        receive_as_human(&mut h, &q, "now", 0);
        assert!(
            !gives_a_goal(&h, &to_m("t"), &base),
            "an answer to m's question"
        );
        human_send(&mut h, &to_m("t"), &Now::current()).unwrap();
        assert!(
            gives_a_goal(&h, &to_m("t"), &base),
            "answered: the next is a goal"
        );
    }

    #[test]
    fn a_long_chat_keeps_its_newest_messages_and_an_unanswered_question() {
        let mut h = human();
        let mut q = from("m", "a waiting question");
        q.need_reply = true;
        q.waiting = Some(vec!["w1".into()]);
        q.receiver = vec!["op".into()];
        receive_as_human(&mut h, &q, "now", 0);
        for i in 0..crate::state::PRIVATE_KEPT + 50 {
            receive_as_human(&mut h, &from("m", &format!("note {i}")), "now", 0);
        }
        let chat =
            &h.conversation_pool.as_ref().unwrap().conversation_privates[&AgentId::from("m")];
        assert_eq!(
            chat[0].content, "a waiting question",
            "still there to be answered"
        );
        assert!(chat.len() <= crate::state::PRIVATE_KEPT + 51);
        // Once answered, it may leave with the rest.
        let reply = HumanMessage {
            choice: None,
            attachments: Vec::new(),
            task_id: "t".into(),
            receiver: vec!["m".into()],
            content: "answer".into(),
            stage_relative: StageRef::NoRelative,
            need_reply: false,
            waiting: false,
            wait_secs: None,
            traceparent: None,
        };
        let sent = human_send(&mut h, &reply, &Now::current()).unwrap();
        assert_eq!(sent[0].return_waiting_id, Some("w1".into()));
        receive_as_human(&mut h, &from("m", "one more"), "now", 0);
        let chat =
            &h.conversation_pool.as_ref().unwrap().conversation_privates[&AgentId::from("m")];
        assert_eq!(chat.len(), crate::state::PRIVATE_KEPT);
        assert_eq!(chat.last().unwrap().content, "one more");
    }

    #[test]
    fn an_answer_to_a_question_must_fit_it_and_is_sent_in_its_canonical_form() {
        let mut h = human();
        let mut q = from("m", "Which colour?");
        q.need_reply = true;
        q.waiting = Some(vec!["w1".into()]);
        q.ask = Some(
            serde_json::from_value(json!({"mode": "select", "options": ["Red", "Blue"]})).unwrap(),
        );
        receive_as_human(&mut h, &q, "now", 0);
        let notices = &h.conversation_pool.as_ref().unwrap().global_messages;
        assert!(
            notices.last().unwrap().contains("Choose one: Red | Blue"),
            "{notices:?}"
        );
        let reply = |content: &str| HumanMessage {
            choice: None,
            attachments: Vec::new(),
            task_id: "t".into(),
            receiver: vec!["m".into()],
            content: content.into(),
            stage_relative: StageRef::NoRelative,
            need_reply: false,
            waiting: false,
            wait_secs: None,
            traceparent: None,
        };
        let before = h.clone();
        let e = human_send(&mut h, &reply("green"), &Now::current()).unwrap_err();
        assert!(
            e.to_string().contains("one of the options: Red | Blue"),
            "{e}"
        );
        // Nothing was recorded: the question still waits for its answer.
        assert_eq!(h.conversation_pool, before.conversation_pool);
        assert_eq!(h.agent_step.steps().len(), before.agent_step.steps().len());
        let sent = human_send(&mut h, &reply(" blue"), &Now::current()).unwrap();
        assert_eq!(sent[0].message, "Blue");
        assert_eq!(sent[0].return_waiting_id, Some("w1".into()));
        // The next message to `m` answers nothing and is free text again.
        assert_eq!(
            human_send(&mut h, &reply("green"), &Now::current()).unwrap()[0].message,
            "green"
        );
    }

    #[test]
    fn notices_past_the_cap_leave_and_are_counted() {
        let mut h = human();
        let kept = crate::state::PRIVATE_KEPT;
        for i in 0..kept + 3 {
            h.add_notice(format!("notice {i}"));
        }
        let p = h.conversation_pool.as_ref().unwrap();
        assert_eq!(p.global_messages.len(), kept);
        assert_eq!(p.global_messages[0], "notice 3");
        assert_eq!(
            p.global_messages_omitted, 3,
            "every notice can still be numbered"
        );
    }

    #[test]
    fn a_waiting_question_is_kept_with_its_wait_id_and_raises_a_notice() {
        let mut h = human();
        let mut m = from("mgr", "Which colour?");
        m.need_reply = true;
        m.waiting = Some(vec!["w1".into()]);
        receive_as_human(&mut h, &m, "now", 1_000);
        let p = h.conversation_pool.as_ref().unwrap();
        let q = &p.conversation_privates[&AgentId::from("mgr")][0];
        assert!(q.waiting && q.return_waiting_id == Some("w1".into()) && !q.replied);
        assert!(p.global_messages[0].contains("waiting for your reply"));
        // The sender stops waiting after the team's patience for a person: the console says by
        // when.
        let patience = h.settings.wait_patience.human.as_millis() as i64;
        assert_eq!(q.reply_by_ms, Some(1_000 + patience));
        let mut chat = from("mgr", "FYI");
        chat.need_reply = true;
        receive_as_human(&mut h, &chat, "now", 1_000);
        let p = h.conversation_pool.as_ref().unwrap();
        assert_eq!(
            p.conversation_privates[&AgentId::from("mgr")][1].reply_by_ms,
            None
        );
    }

    #[test]
    fn the_answer_carries_the_wait_id_once_and_is_recorded_as_a_step() {
        let mut h = human();
        let mut m = from("mgr", "Which colour?");
        m.need_reply = true;
        m.waiting = Some(vec!["w1".into()]);
        receive_as_human(&mut h, &m, "now", 0);
        let send = HumanMessage {
            choice: None,
            attachments: Vec::new(),
            task_id: "t".into(),
            receiver: vec!["mgr".into(), "other".into()],
            content: "Blue".into(),
            stage_relative: StageRef::NoRelative,
            need_reply: false,
            waiting: false,
            wait_secs: None,
            traceparent: None,
        };
        let out = human_send(&mut h, &send, &Now::current()).unwrap();
        assert_eq!(out.len(), 2, "one message per receiver");
        assert_eq!(out[0].return_waiting_id, Some("w1".into()));
        assert_eq!(out[1].return_waiting_id, None);
        let again = human_send(&mut h, &send, &Now::current()).unwrap();
        assert_eq!(again[0].return_waiting_id, None, "a wait is answered once");
        assert_eq!(h.agent_step.steps().len(), 2);
        assert_eq!(
            h.agent_step.steps()[0].execution_state,
            StepExecutionState::Finished
        );
        assert_eq!(h.agent_step.todo_len(), 0);
    }

    #[test]
    fn bad_sends_are_refused() {
        let mut h = human();
        let mut send = HumanMessage {
            choice: None,
            attachments: Vec::new(),
            task_id: "t".into(),
            receiver: vec![],
            content: "x".into(),
            stage_relative: StageRef::NoRelative,
            need_reply: true,
            waiting: false,
            wait_secs: None,
            traceparent: None,
        };
        assert_eq!(
            human_send(&mut h, &send, &Now::current()),
            Err(HumanError::NoReceiver)
        );
        send.receiver = vec!["op".into()];
        assert_eq!(
            human_send(&mut h, &send, &Now::current()),
            Err(HumanError::ToSelf)
        );
        send.receiver = vec!["a".into()];
        send.content = "  ".into();
        assert_eq!(
            human_send(&mut h, &send, &Now::current()),
            Err(HumanError::Empty)
        );
        send.content = "x".into();
        send.wait_secs = Some(0);
        assert_eq!(
            human_send(&mut h, &send, &Now::current()),
            Err(HumanError::BadWait)
        );
        send.wait_secs = None;
        let mut llm = human();
        llm.human_config = None;
        send.content = "x".into();
        assert!(matches!(
            human_send(&mut llm, &send, &Now::current()),
            Err(HumanError::NotHuman(_))
        ));
    }

    #[test]
    fn runtime_instructions_become_notices() {
        let mut h = human();
        let i = Instruction::FinishTask {
            task_id: "t".into(),
        };
        let m = Message::instruction(
            "t".into(),
            TASK_STATE_SENDER.into(),
            vec!["op".into()],
            StageRef::NoRelative,
            &i,
            &crate::texts::Texts::english(),
        );
        receive_as_human(&mut h, &m, "n", 0);
        assert!(h.conversation_pool.as_ref().unwrap().global_messages[0].contains("finished"));
        assert!(
            h.conversation_pool
                .as_ref()
                .unwrap()
                .conversation_privates
                .is_empty()
        );
    }
}
