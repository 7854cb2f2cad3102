//! The record of every model call (see `llm::recorded::Call`): each call, as it ends, waits
//! here for the journal, which writes it as JSON (on its own thread, off the step's path)
//! and stores it before the batch of changes it led to, so a stored run never holds a step
//! whose call is missing. Bounded: a journal that falls behind lets the oldest waiting calls
//! go (counted, and said once).

use crate::llm::recorded::Call;
use crate::store::model_calls::StoredModelCall;
use std::collections::VecDeque;
use std::sync::Mutex;

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

    /// The calls waiting, taken, as the store keeps them (one that cannot be written as JSON
    /// is logged and left out).
    pub(super) fn take(&self) -> Vec<StoredModelCall> {
        let calls: Vec<Call> = {
            let mut p = self.lock();
            p.bytes = 0;
            p.calls.drain(..).collect()
        };
        calls
            .into_iter()
            .filter_map(|call| match serde_json::to_string(&call) {
                Ok(body) => Some(StoredModelCall {
                    seq: call.seq,
                    agent_id: call.agent_id,
                    task_id: call.task_id,
                    step_id: call.step_id,
                    body,
                }),
                Err(e) => {
                    tracing::warn!("a model call could not be recorded: {e}");
                    None
                }
            })
            .collect()
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
        let taken = r.take();
        assert_eq!(taken.iter().map(|c| c.seq).collect::<Vec<_>>(), [1, 2]);
        assert!(taken[0].body.contains("\"prompt\":\"one\""));
        assert!(r.take().is_empty());
        let big = "x".repeat(PENDING_BYTES / 3);
        for seq in 0..5 {
            r.add(call(seq, &big));
        }
        let kept = r.take();
        assert!(
            kept.len() < 5 && kept.last().unwrap().seq == 4,
            "the newest stay"
        );
        assert_eq!(r.lock().dropped, 5 - kept.len() as u64);
    }
}
