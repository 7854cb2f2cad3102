//! How a call asks its endpoint to reuse the prompt prefix it already evaluated: OpenAI's
//! `prompt_cache_key` (the agent's id, so one agent's calls meet the same cache), and on a
//! llama.cpp-style server a slot of the agent's own (`id_slot`, `cache_prompt: true`), so
//! agents stop evicting each other's prefix from a shared slot.

use async_openai::types::chat::CreateChatCompletionRequest;
use cohort_core::ids::AgentId;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// Agents remembered with their slot at most; past it the assignment starts over (an agent
/// may then change slot once, and its next call evaluates its prompt again).
const AGENTS_KEPT: usize = 4096;

/// The request body: the chat completion, and the llama.cpp fields when the team names the
/// server's slots.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Body {
    #[serde(flatten)]
    pub chat: CreateChatCompletionRequest,
    /// The server slot that holds this agent's prefix.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id_slot: Option<u32>,
    /// Asks the server to keep and reuse the evaluated prompt in that slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_prompt: Option<bool>,
}

/// Each agent's slot on a server of `count` slots: given in turn as agents first call, so up
/// to `count` agents never share one.
#[derive(Debug)]
pub(crate) struct Slots {
    count: u32,
    by_agent: Mutex<HashMap<AgentId, u32>>,
}

impl Slots {
    pub fn new(count: u32) -> Self {
        Slots {
            count: count.max(1),
            by_agent: Mutex::default(),
        }
    }

    /// The agent's slot (the same on every call).
    pub fn of(&self, agent: &AgentId) -> u32 {
        let mut by_agent = self.by_agent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = by_agent.get(agent) {
            return *slot;
        }
        if by_agent.len() >= AGENTS_KEPT {
            by_agent.clear();
        }
        let slot = by_agent.len() as u32 % self.count;
        by_agent.insert(agent.clone(), slot);
        slot
    }
}

/// Whether an endpoint's refusal (a 400 or 422 body) names `prompt_cache_key`: a server that
/// does not know the field and rejects it, so it is not sent again.
pub(crate) fn refuses_key(body: &str) -> bool {
    body.contains("prompt_cache_key")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_agent_keeps_its_own_slot_and_agents_share_only_past_the_count() {
        let slots = Slots::new(3);
        let ids: Vec<AgentId> = ["m", "w", "r", "x"].map(AgentId::from).to_vec();
        let got: Vec<u32> = ids.iter().map(|a| slots.of(a)).collect();
        assert_eq!(got, [0, 1, 2, 0]);
        // Asked again, in any order: the same slot.
        assert_eq!(slots.of(&ids[2]), 2);
        assert_eq!(slots.of(&ids[0]), 0);
    }

    #[test]
    fn the_slot_fields_are_sent_only_when_set() {
        let chat = CreateChatCompletionRequest {
            model: "m".into(),
            ..Default::default()
        };
        let plain = serde_json::to_value(Body {
            chat: chat.clone(),
            id_slot: None,
            cache_prompt: None,
        })
        .unwrap();
        assert_eq!(plain["model"], "m");
        assert!(plain.get("id_slot").is_none() && plain.get("cache_prompt").is_none());
        let slotted = serde_json::to_value(Body {
            chat,
            id_slot: Some(2),
            cache_prompt: Some(true),
        })
        .unwrap();
        assert_eq!(
            (
                slotted["id_slot"].as_u64(),
                slotted["cache_prompt"].as_bool()
            ),
            (Some(2), Some(true))
        );
    }
}
