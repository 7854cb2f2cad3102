//! A recorded run's tool calls answered again (`cohort replay`): each call a replayed step
//! makes is answered with what the server answered then (its result, or why it failed), in
//! the order the recorded run made that same call, so a replay does not depend on the world
//! its tools touch having stayed as it was (a file the run wrote is there now).

use cohort_core::call::McpCall;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A recorded call's outcome: its result, or why it failed.
pub type Outcome = Result<Value, String>;

/// The recorded calls, by server and call, each with its outcome.
#[derive(Debug, Default)]
pub struct ToolRecord {
    calls: Mutex<HashMap<(String, String), VecDeque<Outcome>>>,
    served: AtomicUsize,
    /// A fork's record (`cohort replay --fork-at`): a call it has no answer for is made to the
    /// server (the fork's own way), not refused.
    then_live: bool,
}

/// A call as a key: its JSON (arguments' keys in order).
fn key(server: &str, call: &McpCall) -> (String, String) {
    let call = serde_json::to_value(call).unwrap_or_default();
    (server.to_owned(), call.to_string())
}

impl ToolRecord {
    /// The record of `calls` (server, call, outcome), oldest first.
    pub fn new(
        calls: impl IntoIterator<Item = (String, McpCall, Result<Value, String>)>,
    ) -> ToolRecord {
        let mut by_call: HashMap<(String, String), VecDeque<_>> = HashMap::new();
        for (server, call, outcome) in calls {
            by_call
                .entry(key(&server, &call))
                .or_default()
                .push_back(outcome);
        }
        ToolRecord {
            calls: Mutex::new(by_call),
            served: AtomicUsize::new(0),
            then_live: false,
        }
    }

    /// A fork's record: the calls made before the fork's point, answered as then; any other
    /// call is made to its server.
    pub fn forked(
        calls: impl IntoIterator<Item = (String, McpCall, Result<Value, String>)>,
    ) -> ToolRecord {
        ToolRecord {
            then_live: true,
            ..Self::new(calls)
        }
    }

    /// Whether a call the record has no answer for is made to its server.
    pub fn then_live(&self) -> bool {
        self.then_live
    }

    /// The recorded outcome of the next such call; none when the recorded run made no more.
    pub fn answer(&self, server: &str, call: &McpCall) -> Option<Result<Value, String>> {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        let outcome = calls
            .get_mut(&key(server, call))
            .and_then(VecDeque::pop_front)?;
        self.served.fetch_add(1, Ordering::Relaxed);
        Some(outcome)
    }

    /// How many calls were answered from the record.
    pub fn served(&self) -> usize {
        self.served.load(Ordering::Relaxed)
    }

    /// How many recorded calls no step made.
    pub fn left(&self) -> usize {
        let calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        calls.values().map(VecDeque::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(path: &str) -> McpCall {
        McpCall::Tool {
            name: "read_file".into(),
            arguments: json!({"path": path}).as_object().unwrap().clone(),
        }
    }

    #[test]
    fn each_call_gets_its_recorded_outcomes_in_order() {
        let record = ToolRecord::new([
            ("ws".into(), read("a"), Ok(json!({"v": 1}))),
            ("ws".into(), read("a"), Err("gone".into())),
            ("ws".into(), read("b"), Ok(json!({"v": 2}))),
        ]);
        assert_eq!(record.answer("ws", &read("a")), Some(Ok(json!({"v": 1}))));
        assert_eq!(record.answer("ws", &read("b")), Some(Ok(json!({"v": 2}))));
        assert_eq!(record.answer("ws", &read("a")), Some(Err("gone".into())));
        assert_eq!(record.answer("ws", &read("a")), None);
        assert_eq!(record.answer("other", &read("b")), None);
        assert_eq!((record.served(), record.left()), (3, 0));
    }
}
