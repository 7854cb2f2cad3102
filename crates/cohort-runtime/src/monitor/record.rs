//! The record of every model call (see `llm::recorded::Call`): each call, as it ends, waits
//! here for the journal, which writes it as JSON (on its own thread, off the step's path)
//! and stores it in the transaction of the batch of changes it led to, so a stored run never holds a step
//! whose call is missing. Bounded: a journal that falls behind lets the oldest waiting calls
//! go (counted, and said once).

use cohort_core::ids::AgentId;
use cohort_llm::recorded::Call;
use cohort_store::model_calls::{StoredModelCall, SystemText, Trim};
use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

/// The most bytes of calls waiting for the journal.
pub const PENDING_BYTES: usize = 64 << 20;

/// The calls waiting for the journal, and what the store keeps of each agent's.
pub struct Recording {
    /// Bytes of recorded calls the store keeps per agent.
    pub bytes_per_agent: u64,
    pending: Mutex<Pending>,
}

#[derive(Default)]
struct Pending {
    calls: VecDeque<Call>,
    bytes: usize,
    /// Calls let go because the journal fell behind.
    dropped: u64,
    /// Per agent, the bytes recorded since its ring was last trimmed.
    untrimmed: HashMap<AgentId, u64>,
    /// The system prompts, kept once in the store (see `store::model_calls`).
    texts: Texts,
}

/// What the journal knows of the system prompts it stored: each agent's last one with its id
/// (an agent sends the same one call after call, so it is hashed only when it changes), and
/// the ids stored since the last trim (which lets texts no call names go).
#[derive(Default)]
struct Texts {
    last: HashMap<AgentId, (Arc<str>, String)>,
    stored: HashSet<String>,
}

impl Texts {
    /// `call`'s system prompt taken out of it, as the store keeps it.
    fn take(&mut self, call: &mut Call) -> Option<SystemText> {
        let text = std::mem::replace(&mut call.system, Arc::from(""));
        if text.is_empty() {
            return None;
        }
        let id = match self.last.get(&call.agent_id) {
            Some((last, id)) if **last == *text => id.clone(),
            _ => {
                let id = SystemText::id_of(&text);
                self.last
                    .insert(call.agent_id.clone(), (text.clone(), id.clone()));
                id
            }
        };
        let fresh = self.stored.insert(id.clone());
        Some(SystemText {
            bytes: text.len(),
            text: fresh.then(|| text.to_string()),
            id,
        })
    }
}

impl Recording {
    pub fn new(bytes_per_agent: u64) -> Recording {
        Recording {
            bytes_per_agent,
            pending: Mutex::default(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `call` for the journal.
    pub fn add(&self, call: Call) {
        let mut p = self.lock();
        p.bytes += call.bytes();
        p.calls.push_back(call);
        while p.bytes > PENDING_BYTES && p.calls.len() > 1 {
            if let Some(old) = p.calls.pop_front() {
                p.bytes -= old.bytes();
                p.dropped += 1;
                if p.dropped == 1 {
                    tracing::warn!(
                        "the store falls behind the model calls: the oldest waiting are not recorded"
                    );
                }
            }
        }
    }

    /// The store did not take the last calls handed over: the texts they held may be missing
    /// from it, so each is stored again with the next call that sends it.
    pub(super) fn forget_stored_texts(&self) {
        self.lock().texts.stored.clear();
    }

    /// The calls waiting, taken, as the store keeps them (one that cannot be written as JSON
    /// is logged and left out), and the rings to trim with them: each agent's once an eighth
    /// of its bytes was recorded since its last trim, so a trim (which reads the agent's whole
    /// ring) costs a constant share of each call.
    pub(super) fn take(&self) -> (Vec<StoredModelCall>, Trim) {
        let mut trim = Trim {
            bytes_per_agent: self.bytes_per_agent,
            agents: BTreeSet::new(),
        };
        let calls: Vec<(Call, Option<SystemText>)> = {
            let mut p = self.lock();
            p.bytes = 0;
            let mut calls: Vec<Call> = p.calls.drain(..).collect();
            for c in &calls {
                *p.untrimmed.entry(c.agent_id.clone()).or_default() += c.bytes() as u64;
            }
            let due = (self.bytes_per_agent / 8).max(1);
            for (agent, bytes) in p.untrimmed.iter_mut().filter(|(_, b)| **b >= due) {
                trim.agents.insert(agent.clone());
                *bytes = 0;
            }
            let taken = calls
                .iter_mut()
                .map(|c| p.texts.take(c))
                .collect::<Vec<_>>();
            // A trim lets go the texts no kept call names: after it, each is stored again.
            if !trim.agents.is_empty() {
                p.texts.stored.clear();
            }
            calls.into_iter().zip(taken).collect()
        };
        let stored = calls
            .into_iter()
            .filter_map(|(call, system)| match serde_json::to_string(&call) {
                Ok(body) => Some(StoredModelCall {
                    seq: call.seq,
                    agent_id: call.agent_id,
                    task_id: call.task_id,
                    step_id: call.step_id,
                    body,
                    system,
                }),
                Err(e) => {
                    tracing::warn!("a model call could not be recorded: {e}");
                    None
                }
            })
            .collect();
        (stored, trim)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(seq: u64, prompt: &str) -> Call {
        serde_json::from_value(serde_json::json!({
            "step_id": "s", "agent_id": "a", "skill": "think", "seq": seq, "sent_at": 0,
            "answered_at": 0, "system": "", "prompt": prompt, "tool_rounds": 0, "reply": "ok",
            "error": null, "usage": {"prompt_tokens": 1, "completion_tokens": 1}, "cut": null
        }))
        .unwrap()
    }

    #[test]
    fn calls_wait_for_the_journal_in_order_and_a_backlog_lets_the_oldest_go() {
        let r = Recording::new(1 << 20);
        r.add(call(1, "one"));
        r.add(call(2, "two"));
        let (taken, trim) = r.take();
        assert_eq!(taken.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2]);
        assert!(
            trim.agents.is_empty(),
            "far below an eighth of its bytes: no trim yet"
        );
        assert!(taken[0].body.contains("\"prompt\":\"one\""));
        assert!(r.take().0.is_empty());
        let big = "x".repeat(PENDING_BYTES / 3);
        for seq in 0..5 {
            r.add(call(seq, &big));
        }
        let (kept, trim) = r.take();
        assert!(
            kept.len() < 5 && kept.last().unwrap().seq == 4,
            "the newest stay"
        );
        assert_eq!(r.lock().dropped, 5 - kept.len() as u64);
        assert!(
            trim.agents.contains(&AgentId::from("a")),
            "past an eighth: trimmed"
        );
        r.add(call(9, "small"));
        assert!(r.take().1.agents.is_empty(), "counted afresh after a trim");
    }

    #[test]
    fn a_system_prompt_is_sent_to_the_store_once_and_again_after_a_trim_or_a_failure() {
        let r = Recording::new(800);
        let with = |seq: u64, system: &str| {
            let mut c = call(seq, "p");
            c.system = Arc::from(system);
            c
        };
        r.add(with(1, "SYS"));
        r.add(with(2, "SYS"));
        let (taken, trim) = r.take();
        assert!(trim.agents.is_empty());
        let texts: Vec<_> = taken.iter().map(|c| c.system.clone().unwrap()).collect();
        assert_eq!(
            texts[0].text.as_deref(),
            Some("SYS"),
            "sent with the first call"
        );
        assert_eq!(texts[1].text, None, "named by the second");
        assert_eq!(texts[0].id, texts[1].id);
        assert!(!taken[0].body.contains("SYS"), "not in the call's own JSON");
        // A failed store forgets what was sent: the next call sends it again.
        r.forget_stored_texts();
        r.add(with(3, "SYS"));
        let (taken, _) = r.take();
        assert_eq!(
            taken[0].system.as_ref().unwrap().text.as_deref(),
            Some("SYS")
        );
        // A batch with a trim (past an eighth of the 800 bytes) sends it again after it.
        r.add(with(4, &"y".repeat(200)));
        let (_, trim) = r.take();
        assert!(!trim.agents.is_empty());
        r.add(with(5, &"y".repeat(200)));
        let (taken, _) = r.take();
        assert!(taken[0].system.as_ref().unwrap().text.is_some());
        // No system prompt: nothing kept apart.
        r.add(call(6, "p"));
        assert!(r.take().0[0].system.is_none());
    }
}
