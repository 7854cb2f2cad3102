//! send_message: either send (`<send_message>`; when waiting, one fresh wait id per receiver
//! goes on the step lock) or, lacking information, insert a decision step and a copy of this
//! send_message step (`<get_more_info>`).

pub(super) mod answer;
mod schema;

use super::{HistoryKind, Refusal, SkillError, SkillKind, SkillOutcome, working};
use crate::clock::Now;
use crate::ids::{StageRef, TaskId, WaitId};
use crate::message::Message;
use crate::parse::StepRequest;
use crate::policy::{Fired, Repair};
use crate::state::{Agent, Executor, Skill, StepOrigin, StepResult, StepState};
use answer::{SendMessageAnswer, SendMessageDraft};
use serde::Deserialize;
use serde_json::{Map, Value, json};

/// What a send_message step keeps: `{"send_message": …}`, the message it sent (a person's
/// send, recorded as such a step: one message per receiver).
#[derive(Debug, serde::Deserialize)]
pub struct Sent {
    /// The message, or a person's messages.
    pub send_message: SentMessages,
}

/// One message, or a person's one per receiver.
#[derive(Debug, serde::Deserialize)]
#[serde(untagged)]
pub enum SentMessages {
    /// An agent's send.
    One(Box<Message>),
    /// A person's send (its messages are not read: a person's report is their own).
    Many(serde::de::IgnoredAny),
}

/// Sends the message (its wait ids on the step lock when it waits), or inserts the steps that
/// get more information first.
pub fn interpret(
    agent: &mut Agent,
    step: &StepState,
    answer: &str,
    now: Now,
) -> Result<SkillOutcome, SkillError> {
    match answer::read(answer)? {
        SendMessageAnswer::GetMoreInfo(req) => Ok(get_more_info(agent, step, req)),
        SendMessageAnswer::Send(draft) => send(agent, step, draft, now),
    }
}

/// The model asks to learn more before it writes: a decision step with its question goes
/// first, then the same send_message step again (still answering whoever it answered).
fn get_more_info(agent: &mut Agent, step: &StepState, req: StepRequest) -> SkillOutcome {
    let decision = StepState::new(
        step.task_id.clone(),
        step.stage_id.clone(),
        agent.agent_id.clone(),
        Executor::Skill(Skill::Decision),
        req.step_intention.clone(),
        req.text_content.clone(),
    )
    .with_origin(StepOrigin::Planned {
        by: step.step_id.clone(),
    });
    let mut again = StepState::new(
        step.task_id.clone(),
        step.stage_id.clone(),
        agent.agent_id.clone(),
        Executor::Skill(Skill::SendMessage),
        step.step_intention.clone(),
        step.text_content.clone(),
    )
    .with_origin(step.origin.clone());
    // The copy still answers whoever the step answered (and returns their wait id).
    again.reply_to = step.reply_to.clone();
    agent.add_next_steps(vec![decision, again]);
    working(
        json!({ "get_more_info": { "step_intention": req.step_intention, "text_content": req.text_content } }),
    )
}

/// The message the model wrote, checked (receivers, its questions, its stage) and made ready
/// for SyncState to route.
fn send(
    agent: &mut Agent,
    step: &StepState,
    draft: SendMessageDraft,
    now: Now,
) -> Result<SkillOutcome, SkillError> {
    let receiver = receivers(agent, step, draft.receiver)?;
    // Models often copy a stage id wrongly; a message about a stage belongs to the
    // stage of the step that sends it.
    let stage_relative = match draft.stage_relative {
        StageRef::NoRelative => StageRef::NoRelative,
        StageRef::Stage(_) => step.stage_id.clone(),
    };
    if let Some(ask) = &draft.ask {
        check_ask(agent, step, ask, &receiver)?;
    }
    // A body that only hands back the step's instruction or the sender's goal tells the
    // receiver nothing: the echo rule (`policy::echo`).
    if agent.settings.repairs.allows(Repair::Echo)
        && super::repairs::echo::hands_back_work(agent, step, &draft.message)
    {
        return Err(SkillError::Echo(draft.message));
    }
    // A reply closes its exchange: one that asked for a reply in turn let a real 1.5B
    // writer and manager trade replies until the repeat limit stopped them. A further
    // question is a message of its own (a planned send_message), or a person's ask.
    let closes = step.reply_to.is_some()
        && draft.ask.is_none()
        && agent.settings.repairs.allows(Repair::ReplyClosesExchange);
    let reply = closes;
    let mut repairs = Vec::new();
    if closes && (draft.waiting || draft.need_reply) {
        let what = agent.settings.texts.repair_reply_closes_exchange();
        repairs.push(Fired::new(Repair::ReplyClosesExchange, what));
    }
    // A question is asked to be answered: the sender waits for it.
    let waiting = (!reply && (draft.waiting || draft.ask.is_some())).then(|| {
        receiver
            .iter()
            .map(|_| WaitId::random())
            .collect::<Vec<_>>()
    });
    if let Some(w) = &waiting {
        let waits = w.iter().cloned().zip(receiver.iter().cloned()).collect();
        agent.hold_waits(waits, &step.task_id, &step.stage_id, now.unix_ms, None);
    }
    let message = Message {
        task_id: step.task_id.clone(),
        sender_id: agent.agent_id.clone(),
        receiver,
        message: draft.message,
        stage_relative,
        // Waiting for a reply nobody owes would lock the sender forever.
        need_reply: (draft.need_reply && !reply) || waiting.is_some(),
        waiting,
        // Only the runtime links a reply to the wait it answers (`reply_to`); a wait id
        // in the text (copied from someone else's message) is just text.
        return_waiting_id: step.reply_to.as_ref().and_then(|r| r.wait_id.clone()),
        ask: draft.ask,
        body: None,
        traceparent: crate::event::trace_context::TraceParent::of_step(step),
        attachments: Vec::new(),
        choice: None,
    };
    Ok(SkillOutcome {
        send_message: Some(message.clone()),
        repairs,
        ..working(json!({ "send_message": message }))
    })
}

/// Whom the message goes to: whoever the step answers first (a reply always reaches its
/// asker, whatever the model wrote), then the receivers the model named; never the agent
/// itself, never nobody.
fn receivers(
    agent: &Agent,
    step: &StepState,
    named: Vec<crate::ids::AgentId>,
) -> Result<Vec<crate::ids::AgentId>, SkillError> {
    let mut receiver = Vec::new();
    // A reply always reaches the one it answers, whatever the model wrote.
    if let Some(r) = &step.reply_to {
        receiver.push(r.agent_id.clone());
    }
    for r in named {
        if !receiver.contains(&r) {
            receiver.push(r);
        }
    }
    if receiver.is_empty() {
        return Err(Refusal::NoReceiver.into());
    }
    if receiver.contains(&agent.agent_id) {
        return Err(Refusal::MessageToSelf.into());
    }
    Ok(receiver)
}

/// A question for a person (`ask`): only people get one, it must be answerable, and an agent
/// asks at most `step_limits.asks` of them in one stage.
fn check_ask(
    agent: &Agent,
    step: &StepState,
    ask: &crate::state::Ask,
    receiver: &[crate::ids::AgentId],
) -> Result<(), SkillError> {
    // Only a person gets a question's options or form (and has the answer checked).
    if let Some(r) = receiver
        .iter()
        .find(|r| !agent.settings.wait_patience.humans.contains(*r))
    {
        return Err(Refusal::AskToAgent(r.clone()).into());
    }
    ask.check().map_err(Refusal::Unanswerable)?;
    let (asked, cap) = (
        asks_in_stage(agent, &step.task_id, &step.stage_id),
        agent.settings.step_limits.asks,
    );
    if asked >= cap {
        return Err(Refusal::AskLimit { asked, cap }.into());
    }
    Ok(())
}

/// How many structured questions `agent` has put to people in `task`/`stage` (its
/// send_message steps that carried an ask; the stage's step list is capped, so is this).
fn asks_in_stage(agent: &Agent, task: &TaskId, stage: &StageRef) -> usize {
    agent
        .agent_step
        .steps()
        .iter()
        .filter(|s| &s.task_id == task && &s.stage_id == stage && asked(s))
        .count()
}

/// Whether `step` sent a message carrying a question.
fn asked(step: &StepState) -> bool {
    step.executor.skill() == Some(Skill::SendMessage)
        && step
            .execute_result
            .as_ref()
            .and_then(|r| r.read::<Sent>())
            .is_some_and(|s| matches!(s.send_message, SentMessages::One(m) if m.ask.is_some()))
}

/// send_message: sends a message, or asks for more information first.
pub struct SendMessage;

impl SkillKind for SendMessage {
    fn answer_tags(&self) -> &'static [&'static str] {
        &["<send_message>", "<get_more_info>"]
    }

    fn contract_words(&self) -> &'static [&'static str] {
        &[
            "receiver",
            "stage_relative",
            "need_reply",
            "waiting",
            "no_relative",
        ]
    }

    fn history(&self) -> HistoryKind {
        HistoryKind::Stage
    }

    fn answer_schema(&self, agent: &Agent, _step: &StepState, agents: &[String]) -> Value {
        schema::answer_schema(agent, agents)
    }

    fn interpret(
        &self,
        agent: &mut Agent,
        step: &StepState,
        answer: &str,
        now: Now,
    ) -> Result<SkillOutcome, SkillError> {
        interpret(agent, step, answer, now)
    }

    fn acts_through_the_team(&self) -> bool {
        true
    }

    /// The message as its sender wrote it: the runtime's wait ids become `waiting: true` (left
    /// out when it does not wait); the task and sender (the entry's own) are left out.
    fn history_output(&self, output: &mut Map<String, Value>) {
        if let Some(sent) = output.get_mut("send_message")
            && let Ok(m) = Message::deserialize(&*sent)
        {
            *sent = json!({
                "receiver": m.receiver,
                "message": m.message,
                "stage_relative": m.stage_relative,
                "need_reply": m.need_reply,
                "waiting": m.waiting.is_some().then_some(true),
                "ask": m.ask,
            });
        }
    }

    /// The one message sent, and to whom.
    fn reported(&self, result: &StepResult) -> Option<String> {
        let SentMessages::One(m) = result.read::<Sent>()?.send_message else {
            return None;
        };
        let to: Vec<&str> = m.receiver.iter().map(|r| r.as_str()).collect();
        Some(format!("sent to {}: {}", to.join(", "), m.message))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::test_support::*;

    #[test]
    fn a_sent_message_is_what_its_step_reports_and_a_persons_sends_are_not() {
        let mut a = agent(&[Skill::SendMessage]);
        let step = running(&mut a, Skill::SendMessage, "tell them");
        let o = interpret(&mut a, &step, r#"<send_message>{"receiver": ["x", "y"], "message": "done", "stage_relative": "s", "need_reply": false}</send_message>"#, now()).unwrap();
        let result = crate::state::StepResult::output(o.result);
        assert_eq!(
            SendMessage.reported(&result).as_deref(),
            Some("sent to x, y: done")
        );
        let persons = crate::state::StepResult::output(json!({"send_message": [{}, {}]}));
        assert_eq!(SendMessage.reported(&persons), None);
    }

    #[test]
    fn waiting_takes_one_wait_id_per_receiver_onto_the_step_lock() {
        let mut a = agent(&[Skill::SendMessage]);
        let step = running(&mut a, Skill::SendMessage, "ask them");
        let o = interpret(&mut a, &step, r#"<send_message>{"receiver": ["x", "y"], "message": "q?", "stage_relative": "s", "need_reply": true, "waiting": true}</send_message>"#, now()).unwrap();
        let m = o.send_message.unwrap();
        assert_eq!(m.waiting.as_ref().unwrap().len(), 2);
        assert_eq!(
            a.step_lock.ids().collect::<Vec<_>>(),
            m.waiting.as_ref().unwrap().iter().collect::<Vec<_>>()
        );
        assert_eq!(m.sender_id.as_str(), "w");
        assert_eq!(m.stage_relative, step.stage_id);
        // Each wait is for its own receiver's reply, and gives up after the agents' patience.
        let waits = a.step_lock.waits();
        assert_eq!(waits[0].from, Some("x".into()));
        assert_eq!(waits[1].from, Some("y".into()));
        let ten_min = now().unix_ms + 600_000;
        assert!(waits.iter().all(|w| w.until == Some(ten_min)));
        assert_eq!(m.return_waiting_id, None);
    }

    #[test]
    fn a_body_that_hands_back_the_instruction_is_no_message() {
        let mut a = agent(&[Skill::SendMessage]);
        let step = running(
            &mut a,
            Skill::SendMessage,
            "Send the reviewer the finished haiku",
        );
        let answer = |body: &str| {
            format!(
                r#"<send_message>{{"receiver": "x", "message": "{body}", "stage_relative": "no_relative", "need_reply": false, "waiting": false}}</send_message>"#
            )
        };
        let echo = interpret(
            &mut a,
            &step,
            &answer("Send the reviewer the finished haiku."),
            now(),
        );
        assert!(matches!(echo, Err(SkillError::Echo(_))), "{echo:?}");
        let sent = interpret(&mut a, &step, &answer("Rain on the tin roof / ..."), now()).unwrap();
        assert_eq!(
            sent.send_message.unwrap().message,
            "Rain on the tin roof / ..."
        );
    }

    #[test]
    fn a_wait_id_in_the_step_text_is_never_returned() {
        // Someone copied another agent's wait id into this message: it stays text.
        let mut a = agent(&[Skill::SendMessage]);
        let step = running(
            &mut a,
            Skill::SendMessage,
            "q?\n\n<return_waiting_id>w-1</return_waiting_id>",
        );
        let o = interpret(&mut a, &step, r#"<send_message>{"receiver": "x", "message": "a", "stage_relative": "no_relative", "need_reply": false, "waiting": false}</send_message>"#, now()).unwrap();
        let m = o.send_message.unwrap();
        assert_eq!(m.return_waiting_id, None);
        assert!(a.step_lock.is_empty());
        assert_eq!(m.stage_relative, StageRef::NoRelative);
    }

    #[test]
    fn get_more_info_inserts_a_decision_and_a_copy_of_the_send_step() {
        let mut a = agent(&[Skill::SendMessage]);
        let mut step = running(&mut a, Skill::SendMessage, "tell them the total");
        step.reply_to = Some(crate::state::ReplyTo {
            agent_id: "asker".into(),
            wait_id: Some("w-7".into()),
        });
        let o = interpret(&mut a, &step, r#"<get_more_info>{"step_intention": "find total", "text_content": "sum it"}</get_more_info>"#, now()).unwrap();
        assert!(o.send_message.is_none());
        let todo: Vec<_> = a
            .agent_step
            .todo()
            .map(|id| a.agent_step.get(id).unwrap().clone())
            .collect();
        assert_eq!(todo[0].executor, Executor::Skill(Skill::Decision));
        assert_eq!(todo[1].executor, Executor::Skill(Skill::SendMessage));
        assert_eq!(todo[1].text_content, "tell them the total");
        assert_eq!(todo[1].reply_to, step.reply_to);
    }

    #[test]
    fn no_receiver_or_self_is_refused() {
        let mut a = agent(&[Skill::SendMessage]);
        let step = running(&mut a, Skill::SendMessage, "");
        assert!(
            interpret(
                &mut a,
                &step,
                r#"<send_message>{"receiver": [], "message": "a"}</send_message>"#,
                now()
            )
            .is_err()
        );
        assert!(
            interpret(
                &mut a,
                &step,
                r#"<send_message>{"receiver": ["w"], "message": "a"}</send_message>"#,
                now()
            )
            .is_err()
        );
    }

    #[test]
    fn a_reply_always_goes_back_to_the_sender_it_answers() {
        let mut a = agent(&[Skill::SendMessage]);
        let mut step = running(&mut a, Skill::SendMessage, "q?");
        step.reply_to = Some(crate::state::ReplyTo {
            agent_id: "asker".into(),
            wait_id: Some("w-9".into()),
        });
        let o = interpret(&mut a, &step, r#"<send_message>{"receiver": ["x"], "message": "a", "need_reply": false}</send_message>"#, now()).unwrap();
        let m = o.send_message.unwrap();
        assert_eq!(
            m.receiver,
            vec![crate::ids::AgentId::from("asker"), "x".into()]
        );
        assert_eq!(m.return_waiting_id, Some(WaitId::from("w-9")));

        // A reply that asks for a reply in turn does not: it closes the exchange.
        let o = interpret(&mut a, &step, r#"<send_message>{"receiver": ["asker"], "message": "and you?", "need_reply": true, "waiting": true}</send_message>"#, now()).unwrap();
        let m = o.send_message.unwrap();
        assert!(!m.need_reply && m.waiting.is_none(), "{m:?}");
        assert!(a.step_lock.is_empty(), "no wait held");
    }

    #[test]
    fn a_question_waits_for_its_answer_and_a_stage_holds_at_most_three() {
        let mut a = agent(&[Skill::SendMessage]);
        a.settings_mut().wait_patience.humans =
            std::sync::Arc::new(["alice".into()].into_iter().collect());
        let ask = |a: &mut Agent| {
            let step = running(a, Skill::SendMessage, "ask alice");
            let got = interpret(
                a,
                &step,
                r#"<send_message>{"receiver": ["alice"], "message": "Which?", "need_reply": false, "waiting": false, "ask": {"mode": "select", "options": ["red", "blue"]}}</send_message>"#,
                now(),
            );
            if let Ok(o) = &got {
                a.update_step(
                    &step.step_id,
                    crate::event::StepUpdate {
                        execution_state: Some(crate::state::StepExecutionState::Finished),
                        execute_result: Some(Box::new(crate::state::StepResult::output(
                            o.result.clone(),
                        ))),
                        ..Default::default()
                    },
                );
            }
            got
        };
        for n in 1..=3 {
            let m = ask(&mut a).unwrap().send_message.unwrap();
            assert!(m.ask.is_some());
            // A question is asked to be answered: the sender waits, whatever the model wrote.
            assert!(m.need_reply && m.waiting.is_some(), "ask {n}");
        }
        let why = ask(&mut a).err().unwrap().to_string();
        assert!(
            why.contains("you asked 3 already") && why.contains("step_limits.asks"),
            "{why}"
        );
        // A question no one can answer is refused before it is sent.
        let mut b = agent(&[Skill::SendMessage]);
        let first = running(&mut b, Skill::SendMessage, "ask");
        let why = interpret(&mut b, &first, r#"<send_message>{"receiver": ["alice"], "message": "?", "ask": {"mode": "text"}}</send_message>"#, now()).err().unwrap().to_string();
        assert!(why.contains("`alice` is an agent"), "{why}");
        b.settings_mut().wait_patience.humans = a.settings.wait_patience.humans.clone();
        let step = running(&mut b, Skill::SendMessage, "ask");
        let why = interpret(&mut b, &step, r#"<send_message>{"receiver": ["alice"], "message": "?", "ask": {"mode": "select", "options": ["only"]}}</send_message>"#, now()).err().unwrap().to_string();
        assert!(why.contains("cannot be answered"), "{why}");
        let why = interpret(&mut b, &step, r#"<send_message>{"receiver": ["alice"], "message": "?", "ask": {"mode": "poll"}}</send_message>"#, now()).err().unwrap().to_string();
        assert!(why.contains("field `ask` is invalid"), "{why}");
    }
}
