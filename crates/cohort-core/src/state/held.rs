//! What a piece of state costs in memory, roughly: the bytes of its texts plus a fixed
//! allowance for its ids, times and containers. The memory budget (`retention.memory_mib`) is
//! held by these figures: they are summed as data enters and leaves, never by walking what is
//! kept.

use super::{PrivateMessage, SharedInfo, StepResult, StepState};
use crate::message::Message;
use serde_json::Value;

/// What every kept item costs beyond its texts (ids, timestamps, the container's slot).
const ITEM: usize = 160;

/// The bytes an item holds in memory, roughly.
pub trait Held {
    /// Its texts' bytes plus the fixed allowance per item, as counted against the budget.
    fn held_bytes(&self) -> usize;
}

impl Held for Message {
    fn held_bytes(&self) -> usize {
        ITEM + self.message.len() + self.receiver.len() * 40
    }
}

impl Held for SharedInfo {
    fn held_bytes(&self) -> usize {
        ITEM + self.content.len() + self.role.len()
    }
}

impl Held for PrivateMessage {
    fn held_bytes(&self) -> usize {
        ITEM + self.content.len()
    }
}

impl Held for StepState {
    fn held_bytes(&self) -> usize {
        ITEM + self.step_intention.len()
            + self.text_content.len()
            + self.instruction_content.as_ref().map_or(0, value_bytes)
            + self
                .execute_result
                .as_ref()
                .map_or(0, StepResult::held_bytes)
    }
}

/// A JSON value's bytes in memory, roughly: its strings and keys, and a slot per node.
pub fn value_bytes(v: &Value) -> usize {
    const NODE: usize = 32;
    match v {
        Value::String(s) => NODE + s.len(),
        Value::Array(items) => NODE + items.iter().map(value_bytes).sum::<usize>(),
        Value::Object(map) => {
            NODE + map
                .iter()
                .map(|(k, v)| k.len() + value_bytes(v))
                .sum::<usize>()
        }
        _ => NODE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_items_bytes_grow_with_its_texts() {
        let short = json!({"a": "b"});
        let long = json!({"a": "b".repeat(10_000), "list": vec!["x"; 100]});
        assert!(value_bytes(&long) > 10_000 + value_bytes(&short));
        let m = |text: &str| {
            Message::notice(
                "t".into(),
                "a".into(),
                vec!["b".into()],
                crate::ids::StageRef::NoRelative,
                text.into(),
            )
        };
        assert_eq!(
            m(&"x".repeat(16_384)).held_bytes() - m("").held_bytes(),
            16_384
        );
    }
}
