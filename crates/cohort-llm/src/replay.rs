//! A model served from a recorded run (`cohort replay`): each agent's calls are answered with
//! what the model answered then, in the order the agent made them, and each request is
//! checked against the recorded one (through the map of the two runs' ids, see
//! `call::replay`): a prompt that differs is a divergence, kept with its first differing line,
//! so a prompt change's effect shows without a model. No call leaves the process.
//!
//! Each answer is also given in its recorded turn among the team's asks and answers (see
//! `Record::in_turn`): which step an agent takes next, and what it has heard by then, depend
//! on which other agents' answers have come and which messages came before an answer, so a
//! replay answering everything at once could run another schedule than the recorded one and
//! end in other states. For the same reason each agent takes its messages where the record
//! has them among its own asks and answers (the counts of `call::Intake` each call kept): an
//! answer waits for the messages its agent had taken when it came, a message waits for the
//! asks and answers its agent made before taking it (`Record::may_take`), and an agent starts
//! a step only once it has taken the messages it had when it asked that step's call
//! (`Record::may_start`). A message's way to its agent goes through the store, which a loaded
//! machine slows by any amount; without these a replay under load took another schedule.

use super::recorded::Call;
use super::{ChatModel, ChatReply, ChatRequest, LlmError};
use cohort_core::call::replay::{FirstDifference, IdMap};
use cohort_core::ids::{AgentId, StepId};
use futures::future::BoxFuture;
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// How long an answer waits for the asks and answers recorded before it (and for its agent's
/// messages), a message for its agent's asks and answers, a step for its agent's messages.
/// Replayed work comes at once, so a wait this long means the run has left the recorded
/// schedule (it does something only after this that the recorded run did before it): what
/// waited then goes ahead.
pub const TURN_WAIT: Duration = Duration::from_secs(5);

/// A request that differs from the recorded one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Divergence {
    pub agent_id: AgentId,
    pub skill: String,
    /// The replayed step that made it.
    pub step_id: StepId,
    /// Which part differs: `system` or `prompt`.
    pub part: &'static str,
    pub difference: FirstDifference,
}

/// The recorded calls being served, and what the replay found.
pub struct Record {
    by_agent: Mutex<HashMap<AgentId, VecDeque<Call>>>,
    /// A fork's point (`cohort replay --fork-at`): recorded calls from this `seq` on are not
    /// served; a request they would answer, or one the record has nothing for, goes to the
    /// live model. None: every call is answered from the record.
    live_from: Option<u64>,
    ids: Mutex<IdMap>,
    divergences: Mutex<Vec<Divergence>>,
    served: AtomicUsize,
    /// How many calls went to the live model (past a fork's point).
    live: AtomicUsize,
    /// The asks and answers of the recorded calls served from the record that have not come
    /// yet, each by its place (a call's `seq`, its `answered_seq`: one clock).
    to_come: Mutex<BTreeSet<u64>>,
    /// Told whenever one of them comes.
    came: Notify,
    /// How many answers, messages and steps went ahead after waiting [`TURN_WAIT`] for their
    /// turn.
    out_of_turn: AtomicUsize,
    /// The agents whose calls all counted the messages taken, never falling (an agent that
    /// moved between nodes, or whose process restarted, counted afresh): only their messages
    /// and steps keep the record's order (see the note at the top).
    counted: HashSet<AgentId>,
    /// By agent, the messages taken (`taken_at_answer`) of its calls asked and not answered
    /// yet: its next message waits for those answers that came before it.
    answering: Mutex<HashMap<AgentId, Vec<u64>>>,
    /// The agents a wait for their order ran out for: their run has left the record, and
    /// holding their messages and steps would only make every later one wait as long.
    left_order: Mutex<HashSet<AgentId>>,
}

/// When a recorded answer is given.
struct Turn {
    /// Its place among the team's asks and answers.
    place: u64,
    /// The messages its agent had taken when it came, where the record counted them.
    taken: Option<u64>,
}

/// How a request is answered.
enum Answer {
    /// The recorded call answers, once in its turn (its answer's place) and once its agent
    /// has taken the messages it had then (when the record counted them).
    Recorded(Turn, Result<Option<ChatReply>, LlmError>),
    /// Past a fork's point: the live model answers.
    Live,
}

impl Record {
    /// The record of `calls` (any order: each agent's are served by their `seq`).
    pub fn new(calls: Vec<Call>) -> Arc<Record> {
        Self::forked(calls, None)
    }

    /// The record of `calls` answering every call made before `live_from` (a recorded
    /// call's `seq`: the fork's point); from there on, the live model answers.
    pub fn forked(mut calls: Vec<Call>, live_from: Option<u64>) -> Arc<Record> {
        calls.sort_by_key(|c| c.seq);
        let counted = counted_throughout(&calls);
        let mut by_agent: HashMap<AgentId, VecDeque<Call>> = HashMap::new();
        let mut to_come = BTreeSet::new();
        for c in calls {
            if live_from.is_none_or(|at| c.seq < at) {
                to_come.insert(c.seq);
                if c.answered_seq > 0 {
                    to_come.insert(c.answered_seq);
                }
            }
            by_agent.entry(c.agent_id.clone()).or_default().push_back(c);
        }
        Arc::new(Record {
            by_agent: Mutex::new(by_agent),
            live_from,
            ids: Mutex::default(),
            divergences: Mutex::default(),
            served: AtomicUsize::new(0),
            live: AtomicUsize::new(0),
            to_come: Mutex::new(to_come),
            came: Notify::new(),
            out_of_turn: AtomicUsize::new(0),
            counted,
            answering: Mutex::default(),
            left_order: Mutex::default(),
        })
    }

    /// The requests that differed from the recorded ones, in the order they were made.
    pub fn divergences(&self) -> Vec<Divergence> {
        self.divergences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many calls were answered from the record.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::Relaxed)
    }

    /// How many calls the live model answered (past a fork's point).
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// How many answers, messages and steps went ahead out of their recorded turn (what was
    /// recorded before them did not come within [`TURN_WAIT`]).
    pub fn out_of_turn(&self) -> usize {
        self.out_of_turn.load(Ordering::Relaxed)
    }

    /// How many recorded calls no request asked for.
    pub fn left(&self) -> usize {
        let by_agent = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        by_agent.values().map(VecDeque::len).sum()
    }

    /// How the recorded run's final states and the replayed run's differ (see
    /// `call::replay::state_differences`), through the ids the replay paired.
    pub fn state_differences(
        &self,
        recorded: &serde_json::Value,
        replayed: &serde_json::Value,
        most: usize,
        t: &cohort_core::texts::Texts,
    ) -> Vec<String> {
        let ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        cohort_core::call::replay::state_differences(recorded, replayed, &ids, most, t)
    }

    /// The answer to `request`: the agent's next recorded call's, checked and with its ids
    /// made the replayed run's; past a fork's point, the live model's.
    fn answer(&self, request: &ChatRequest) -> Result<Answer, LlmError> {
        let call = {
            let mut by_agent = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
            let calls = by_agent.get_mut(&request.agent_id);
            let call = calls.and_then(|calls| next_for(calls, request, self.live_from));
            match (call, self.live_from) {
                (Some(call), _) => call,
                (None, Some(_)) => {
                    self.live.fetch_add(1, Ordering::Relaxed);
                    return Ok(Answer::Live);
                }
                (None, None) => {
                    return Err(LlmError::Replay(format!(
                        "the record has no more calls of agent `{}` (this run asks more than \
                         the recorded one did)",
                        request.agent_id
                    )));
                }
            }
        };
        self.served.fetch_add(1, Ordering::Relaxed);
        self.check(&call, request);
        self.came_at(call.seq);
        let ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        let reply = match (&call.reply, &call.error) {
            (Some(text), _) => Ok(Some(ChatReply {
                text: ids.to_replayed(text),
                usage: call.usage,
                cut: call.cut,
                tool_calls: call
                    .tool_calls
                    .iter()
                    .map(|c| crate::ToolCall {
                        arguments: ids.to_replayed(&c.arguments),
                        ..c.clone()
                    })
                    .collect(),
            })),
            // Abandoned then: whatever abandoned it will do so again.
            (None, Some(e)) if e.starts_with("abandoned") => Ok(None),
            (None, e) => Err(LlmError::Replay(format!(
                "as recorded, the call failed: {}",
                e.as_deref().unwrap_or("(no reason kept)")
            ))),
        };
        // Its answer's turn: where the record placed it, else (a record from before answers
        // were placed) right after its ask.
        let place = if call.answered_seq > 0 {
            call.answered_seq
        } else {
            call.seq
        };
        // An answer abandoned then never comes: no message waits for it.
        let taken = call
            .taken_at_answer
            .filter(|_| self.keeps_order(&request.agent_id) && !matches!(reply, Ok(None)));
        if let Some(n) = taken {
            self.answer_owed(&request.agent_id, n);
        }
        Ok(Answer::Recorded(Turn { place, taken }, reply))
    }

    /// Whether `agent` may take its `k`-th message (from 1) now: in the record it took it
    /// after every call it had asked with fewer messages taken, and after every answer that
    /// came to it with fewer.
    pub fn may_take(&self, agent: &AgentId, k: u64) -> bool {
        if !self.keeps_order(agent) {
            return true;
        }
        let answered = self
            .answering
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(agent)
            .is_none_or(|waiting| waiting.iter().all(|&n| n >= k));
        answered && self.next_ask(agent).is_none_or(|n| n >= k)
    }

    /// Whether `agent`, which has taken `taken` messages, may start its next step that asks
    /// its model: in the record it asked its next call with at most as many taken.
    pub fn may_start(&self, agent: &AgentId, taken: u64) -> bool {
        !self.keeps_order(agent) || self.next_ask(agent).is_none_or(|n| n <= taken)
    }

    /// Whether `agent`'s messages and steps are kept in the record's order: its record counted
    /// them throughout, and no wait for its order has run out.
    fn keeps_order(&self, agent: &AgentId) -> bool {
        self.counted.contains(agent)
            && !self
                .left_order
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(agent)
    }

    /// Waits as `until` does, for `agent`'s order (its message, its step, its answer):
    /// one that runs out leaves the agent to go on as things come.
    pub async fn until_for(&self, agent: &AgentId, ready: impl Fn(&Record) -> bool) -> bool {
        let came = self.until(ready).await;
        if !came {
            self.left_order
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(agent.clone());
            self.came.notify_waiters();
        }
        came
    }

    /// An agent took a message: what waits for it looks again.
    pub fn took_message(&self) {
        self.came.notify_waiters();
    }

    /// Waits until `ready` holds, or [`TURN_WAIT`] has passed (counted as out of turn, and
    /// false): replayed work comes at once, so a wait that long means the run left the record.
    async fn until(&self, ready: impl Fn(&Record) -> bool) -> bool {
        let deadline = tokio::time::Instant::now() + TURN_WAIT;
        loop {
            let came = self.came.notified();
            tokio::pin!(came);
            // Registered before the check, so a change between the two is not missed.
            came.as_mut().enable();
            if ready(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, came).await.is_err() {
                self.out_of_turn.fetch_add(1, Ordering::Relaxed);
                return false;
            }
        }
    }

    /// The messages `agent` had taken when it asked its next recorded call (one made before
    /// a fork's point), if the record counted them.
    fn next_ask(&self, agent: &AgentId) -> Option<u64> {
        let by_agent = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        let next = by_agent.get(agent)?.front()?;
        if self.live_from.is_some_and(|at| next.seq >= at) {
            return None;
        }
        next.taken_at_ask
    }

    /// `agent` asked a call whose answer came with `taken` messages taken.
    fn answer_owed(&self, agent: &AgentId, taken: u64) {
        let mut answering = self.answering.lock().unwrap_or_else(|p| p.into_inner());
        answering.entry(agent.clone()).or_default().push(taken);
    }

    /// That answer was given, or will never be (its call was let go).
    fn answer_settled(&self, agent: &AgentId, taken: u64) {
        let mut answering = self.answering.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(waiting) = answering.get_mut(agent)
            && let Some(at) = waiting.iter().position(|&n| n == taken)
        {
            waiting.swap_remove(at);
        }
        drop(answering);
        self.came.notify_waiters();
    }

    /// The ask or answer placed at `place` came.
    fn came_at(&self, place: u64) {
        self.to_come
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&place);
        self.came.notify_waiters();
    }

    /// Waits until every ask and answer recorded before `turn` has come (or [`TURN_WAIT`] has
    /// passed, counted as out of turn), then counts the answer placed at `turn` as come: the
    /// answers come in their recorded turns.
    async fn in_turn(&self, turn: u64) {
        self.until(|r| {
            let to_come = r.to_come.lock().unwrap_or_else(|p| p.into_inner());
            to_come.first().is_none_or(|&first| first >= turn)
        })
        .await;
        self.came_at(turn);
    }

    /// Learns the two runs' ids from the request, and keeps where it differs.
    fn check(&self, call: &Call, request: &ChatRequest) {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        ids.learn(&call.system, &request.system);
        ids.learn(&call.prompt, &request.prompt);
        let parts = [
            ("system", &call.system, &request.system),
            ("prompt", &call.prompt, &request.prompt),
        ];
        for (part, recorded, replayed) in parts {
            if let Some(difference) = ids.first_difference(recorded, replayed) {
                self.divergences
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(Divergence {
                        agent_id: request.agent_id.clone(),
                        skill: request.skill.clone(),
                        step_id: request.step_id.clone(),
                        part,
                        difference,
                    });
            }
        }
    }
}

/// The agents each of whose calls (`calls` in the order they were asked) counted the
/// messages taken at its ask, the counts never falling from one ask to the next nor from an
/// ask to its answer (an agent that moved between nodes in the recorded run counted afresh on
/// its new node: its order cannot be kept by the counts).
fn counted_throughout(calls: &[Call]) -> HashSet<AgentId> {
    let mut last: HashMap<&AgentId, Option<u64>> = HashMap::new();
    for c in calls {
        let seen = last.entry(&c.agent_id).or_insert(Some(0));
        let answer_after = c
            .taken_at_answer
            .is_none_or(|n| c.taken_at_ask.is_some_and(|at| n >= at));
        *seen = match (*seen, c.taken_at_ask) {
            (Some(before), Some(at)) if at >= before && answer_after => Some(at),
            _ => None,
        };
    }
    last.into_iter()
        .filter_map(|(agent, ok)| ok.map(|_| agent.clone()))
        .collect()
}

/// The agent's recorded call that answers `request`: its next call for the same skill and
/// the same step text (an agent runs a plan's parallel steps side by side, and they may ask
/// in another order than they did), else simply its next call; none made from `live_from` on.
fn next_for(
    calls: &mut VecDeque<Call>,
    request: &ChatRequest,
    live_from: Option<u64>,
) -> Option<Call> {
    use cohort_core::call::replay::without_ids;
    let asked = without_ids(&request.step_text);
    let before_fork = |c: &Call| live_from.is_none_or(|at| c.seq < at);
    let same_step = calls.iter().position(|c| {
        c.skill == request.skill
            && !c.step_text.is_empty()
            && without_ids(&c.step_text) == asked
            && before_fork(c)
    });
    let at = same_step.or_else(|| calls.front().filter(|c| before_fork(c)).map(|_| 0))?;
    calls.remove(at)
}

/// A team's model in a replay: shaped as the configured one (its prompt budget, tokenizer,
/// native tools, constrained answers, images: all of which shape the prompt), answered from
/// the record.
pub struct Replayed {
    inner: Arc<dyn ChatModel>,
    record: Arc<Record>,
}

impl Replayed {
    /// `inner`, the configured model, is asked nothing; `record` answers.
    pub fn new(inner: Arc<dyn ChatModel>, record: Arc<Record>) -> Arc<Replayed> {
        Arc::new(Replayed { inner, record })
    }
}

/// An answer owed to an agent (see [`Record::may_take`]), settled when dropped.
struct Owed {
    record: Arc<Record>,
    agent: AgentId,
    taken: u64,
}

impl Drop for Owed {
    fn drop(&mut self) {
        self.record.answer_settled(&self.agent, self.taken);
    }
}

impl ChatModel for Replayed {
    super::delegate_to_inner!();

    fn chat(&self, request: ChatRequest) -> BoxFuture<'static, Result<ChatReply, LlmError>> {
        let (turn, answer) = match self.record.answer(&request) {
            Ok(Answer::Live) => return self.inner.chat(request),
            Ok(Answer::Recorded(turn, answer)) => (Some(turn), answer),
            Err(e) => (None, Err(e)),
        };
        let record = self.record.clone();
        // Owed until given, or let go with its step (dropped): a message that waits for it
        // must not wait for an answer that will never come.
        let owed = turn.as_ref().and_then(|t| t.taken).map(|taken| Owed {
            record: record.clone(),
            agent: request.agent_id.clone(),
            taken,
        });
        Box::pin(async move {
            if let Some(Turn { place, taken }) = turn {
                // The messages its agent had taken when the answer came, first: the answer is
                // taken in the same turn of the agent as it is counted come.
                if let (Some(n), Some(intake)) = (taken, &request.intake) {
                    let agent = &request.agent_id;
                    record
                        .until_for(agent, |r| !r.keeps_order(agent) || intake.taken() >= n)
                        .await;
                }
                record.in_turn(place).await;
            }
            drop(owed);
            match answer? {
                Some(reply) => {
                    if let Some(p) = &request.progress {
                        p.tell(&reply.text);
                    }
                    Ok(reply)
                }
                // Abandoned then: whatever abandoned it will do so again.
                None => std::future::pending().await,
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Intake;

    const T1: &str = "0b2b7c3e-1f0a-4c55-9a1e-5d6f7a8b9c0d";
    const T2: &str = "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee";

    fn call(agent: &str, seq: u64, prompt: &str, reply: &str) -> Call {
        serde_json::from_value(serde_json::json!({
            "step_id": "s", "agent_id": agent, "skill": "think", "seq": seq, "sent_at": 0,
            "answered_at": 0, "system": "SYS", "prompt": prompt, "tool_rounds": 0,
            "reply": reply, "error": null, "usage": {"prompt_tokens": 7, "completion_tokens": 3},
            "cut": null
        }))
        .unwrap()
    }

    /// A model the replay is shaped as (asked nothing).
    fn shape() -> Arc<dyn ChatModel> {
        crate::scripted::ScriptedModel::new(crate::scripted::Script::parse("replies: {}").unwrap())
    }

    fn request(agent: &str, prompt: &str) -> ChatRequest {
        ChatRequest {
            system: "SYS".into(),
            prompt: prompt.into(),
            ..ChatRequest::test(agent, "think")
        }
    }

    #[tokio::test]
    async fn each_agent_is_answered_in_its_order_with_the_replayed_runs_ids() {
        let record = Record::new(vec![
            call("w", 2, "then", "second"),
            call(
                "m",
                3,
                &format!("task {T1}"),
                &format!("<finish>{T1}</finish>"),
            ),
            call("w", 1, "first", "first answer"),
        ]);
        let model = Replayed::new(shape(), record.clone());
        let a = model.chat(request("w", "first")).await.unwrap();
        assert_eq!(a.text, "first answer");
        assert_eq!(a.usage.prompt_tokens, 7);
        let b = model.chat(request("w", "then, changed")).await.unwrap();
        assert_eq!(
            b.text, "second",
            "a changed prompt is still answered as recorded"
        );
        let m = model
            .chat(request("m", &format!("task {T2}")))
            .await
            .unwrap();
        assert_eq!(
            m.text,
            format!("<finish>{T2}</finish>"),
            "the replayed task's id"
        );
        let d = record.divergences();
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(d[0].part, "prompt");
        assert_eq!(d[0].difference.replayed.as_deref(), Some("then, changed"));
        let more = model.chat(request("w", "more")).await.unwrap_err();
        assert!(
            more.to_string().contains("no more calls of agent `w`"),
            "{more}"
        );
        assert_eq!((record.served(), record.left()), (3, 0));
        assert_eq!(record.out_of_turn(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_is_answered_once_the_calls_recorded_before_it_were_asked() {
        let record = Record::new(vec![
            call("a", 1, "first", "a's"),
            call("b", 2, "second", "b's"),
            call("c", 3, "third", "c's"),
        ]);
        let model = Replayed::new(shape(), record.clone());
        let b = tokio::spawn(model.chat(request("b", "second")));
        tokio::task::yield_now().await;
        assert!(!b.is_finished(), "b waits for a's turn");
        let a = model.chat(request("a", "first")).await.unwrap();
        assert_eq!(a.text, "a's");
        assert_eq!(b.await.unwrap().unwrap().text, "b's");
        assert_eq!(record.out_of_turn(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_for_what_was_asked_before_it_came() {
        // Recorded: a asked (1), b asked (2), a answered (3), b answered (4); b's step heard
        // nothing of a's answer.
        let placed = |mut c: Call, answered: u64| {
            c.answered_seq = answered;
            c
        };
        let record = Record::new(vec![
            placed(call("a", 1, "first", "a's"), 3),
            placed(call("b", 2, "second", "b's"), 4),
        ]);
        let model = Replayed::new(shape(), record.clone());
        let a = tokio::spawn(model.chat(request("a", "first")));
        tokio::task::yield_now().await;
        assert!(!a.is_finished(), "a's answer waits for b's ask");
        let b = model.chat(request("b", "second")).await.unwrap();
        assert_eq!(b.text, "b's");
        assert!(a.is_finished(), "b's answer came after a's");
        assert_eq!(a.await.unwrap().unwrap().text, "a's");
        assert_eq!(record.out_of_turn(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_whose_turn_never_comes_goes_ahead_and_is_counted() {
        let record = Record::new(vec![
            call("a", 1, "never asked", "a's"),
            call("b", 2, "second", "b's"),
        ]);
        let model = Replayed::new(shape(), record.clone());
        let started = tokio::time::Instant::now();
        let b = model.chat(request("b", "second")).await.unwrap();
        assert_eq!(b.text, "b's");
        assert!(started.elapsed() >= TURN_WAIT);
        assert_eq!((record.out_of_turn(), record.left()), (1, 1));
    }

    /// `c` as recorded with `ask` messages taken when its step started and `answer` when its
    /// answer came.
    fn counted(mut c: Call, ask: u64, answer: u64) -> Call {
        c.taken_at_ask = Some(ask);
        c.taken_at_answer = Some(answer);
        c
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_waits_for_the_steps_and_answers_its_agent_had_before_it() {
        // Recorded: a started its first step with nothing taken and was answered; it took a
        // message; then it started its second step.
        let record = Record::new(vec![
            counted(call("a", 1, "first", "a's"), 0, 0),
            counted(call("a", 2, "second", "a's second"), 1, 1),
        ]);
        let agent = AgentId::from("a");
        assert!(!record.may_take(&agent, 1), "before a's first step");
        assert!(record.may_start(&agent, 0));
        let model = Replayed::new(shape(), record.clone());
        let intake = Intake::default();
        let first = ChatRequest {
            intake: Some(intake.for_request()),
            ..request("a", "first")
        };
        let answer = model.chat(first);
        assert!(!record.may_take(&agent, 1), "asked, not yet answered");
        assert_eq!(answer.await.unwrap().text, "a's");
        assert!(record.may_take(&agent, 1), "after a's first answer");
        assert!(
            !record.may_start(&agent, 0),
            "the second step waits for the message"
        );
        intake.took_one();
        record.took_message();
        assert!(record.may_start(&agent, intake.taken()));
        assert!(
            !record.may_take(&agent, 2),
            "a took one message before its second step"
        );
        assert_eq!(record.out_of_turn(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn an_answer_waits_for_the_messages_its_agent_had_when_it_came() {
        let record = Record::new(vec![counted(call("a", 1, "first", "a's"), 0, 1)]);
        let model = Replayed::new(shape(), record.clone());
        let intake = Intake::default();
        let asked = ChatRequest {
            intake: Some(intake.for_request()),
            ..request("a", "first")
        };
        let answer = tokio::spawn(model.chat(asked));
        tokio::task::yield_now().await;
        assert!(
            !answer.is_finished(),
            "the message came first in the record"
        );
        assert!(
            record.may_take(&AgentId::from("a"), 1),
            "the message may come"
        );
        intake.took_one();
        record.took_message();
        assert_eq!(answer.await.unwrap().unwrap().text, "a's");
        assert_eq!(record.out_of_turn(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_let_go_before_its_answer_holds_no_message() {
        let record = Record::new(vec![counted(call("a", 1, "first", "a's"), 0, 1)]);
        let model = Replayed::new(shape(), record.clone());
        let intake = Intake::default();
        let asked = model.chat(ChatRequest {
            intake: Some(intake.for_request()),
            ..request("a", "first")
        });
        let agent = AgentId::from("a");
        assert!(
            !record.may_take(&agent, 2),
            "the answer came before the second message"
        );
        drop(asked);
        assert!(
            record.may_take(&agent, 2),
            "its step let it go: it will never come"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_whose_turn_never_comes_goes_ahead_and_is_counted() {
        let record = Record::new(vec![counted(call("a", 1, "never asked", "a's"), 0, 0)]);
        let agent = AgentId::from("a");
        let started = tokio::time::Instant::now();
        assert!(!record.until_for(&agent, |r| r.may_take(&agent, 1)).await);
        assert!(started.elapsed() >= TURN_WAIT);
        assert_eq!(record.out_of_turn(), 1);
        // Its run left the record: its later messages and steps wait no more.
        assert!(record.may_take(&agent, 2) && record.may_start(&agent, 0));
    }

    #[test]
    fn only_agents_counted_throughout_keep_their_messages_in_order() {
        let calls = vec![
            counted(call("a", 1, "", ""), 0, 1),
            // Side by side: a's second step started before its first one's answer came.
            counted(call("a", 2, "", ""), 0, 2),
            counted(call("a", 3, "", ""), 2, 2),
            // Moved to another node, which counted afresh.
            counted(call("m", 4, "", ""), 3, 3),
            counted(call("m", 5, "", ""), 0, 0),
            // A record from before the counts.
            call("old", 6, "", ""),
        ];
        let counted: Vec<String> = counted_throughout(&calls)
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(counted, ["a"]);
        let record = Record::new(calls);
        for agent in ["m", "old"] {
            let agent = AgentId::from(agent);
            assert!(record.may_take(&agent, 9) && record.may_start(&agent, 0));
        }
    }

    #[tokio::test]
    async fn a_fork_answers_from_the_record_before_its_point_and_live_from_there() {
        let record = Record::forked(
            vec![
                call("w", 1, "first", "recorded first"),
                call("m", 2, "plan", "recorded plan"),
                call("w", 3, "second", "recorded second"),
            ],
            Some(3),
        );
        let live = crate::scripted::ScriptedModel::new(
            crate::scripted::Script::parse(
                "replies:\n  w:\n    think:\n      - live second\n      - live third\n",
            )
            .unwrap(),
        );
        let model = Replayed::new(live, record.clone());
        let ask = |a: &str, p: &str| model.chat(request(a, p));
        assert_eq!(ask("w", "first").await.unwrap().text, "recorded first");
        assert_eq!(ask("m", "plan").await.unwrap().text, "recorded plan");
        assert_eq!(
            ask("w", "second").await.unwrap().text,
            "live second",
            "the fork's point"
        );
        assert_eq!(
            ask("w", "third").await.unwrap().text,
            "live third",
            "past the record"
        );
        assert_eq!((record.served(), record.live(), record.left()), (2, 2, 1));
    }
}
