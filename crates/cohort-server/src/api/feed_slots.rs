//! How many websocket feeds are open, per person and in all, so a person (many tabs) or a crowd
//! of clients cannot make the server hold feeds without end. A feed holds a slot for as long
//! as it runs; the slot is given back when it ends, however it ends.

use super::ws::FeedConfig;
use cohort_core::ids::AgentId;
use cohort_core::texts::Texts;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Open feeds, per person and in all; a feed's slot is given back when it ends.
#[derive(Default)]
pub struct FeedSlots {
    open: Mutex<HashMap<AgentId, usize>>,
}

/// Why a feed gets no slot: its person, or the server, has the most feeds open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlotRefused {
    /// `human` has `open` feeds, the most one person may.
    PerPerson { human: AgentId, open: usize },
    /// The server has `total` feeds, the most in all.
    Total { total: usize },
}

impl SlotRefused {
    /// Why, in the language of `t`.
    pub fn render(&self, t: &Texts) -> String {
        match self {
            SlotRefused::PerPerson { human, open } => t.api_feed_limit_person(human, open),
            SlotRefused::Total { total } => t.api_feed_limit_total(total),
        }
    }
}

/// In English, as a websocket's close frame and the logs say it.
impl std::fmt::Display for SlotRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.render(&Texts::english()))
    }
}

/// One open feed's place in [`FeedSlots`].
pub struct FeedSlot {
    slots: Arc<FeedSlots>,
    human: AgentId,
}

impl FeedSlots {
    /// A slot for one more feed of `human`, or why there is none.
    pub fn take(
        self: &Arc<Self>,
        human: &AgentId,
        cfg: &FeedConfig,
    ) -> Result<FeedSlot, SlotRefused> {
        let mut open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        let total: usize = open.values().sum();
        let mine = open.get(human).copied().unwrap_or(0);
        if mine >= cfg.max_per_human {
            return Err(SlotRefused::PerPerson {
                human: human.clone(),
                open: mine,
            });
        }
        if total >= cfg.max_total {
            return Err(SlotRefused::Total { total });
        }
        *open.entry(human.clone()).or_default() += 1;
        Ok(FeedSlot {
            slots: self.clone(),
            human: human.clone(),
        })
    }
}

impl FeedSlots {
    /// The feeds open now, of everyone.
    pub fn open(&self) -> usize {
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .sum()
    }
}

impl Drop for FeedSlot {
    fn drop(&mut self) {
        let mut open = self.slots.open.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.human) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.human);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_are_capped_per_person_and_in_all() {
        let slots = Arc::new(FeedSlots::default());
        let cfg = FeedConfig {
            max_per_human: 2,
            max_total: 3,
            ..FeedConfig::default()
        };
        let a1 = slots.take(&"a".into(), &cfg).unwrap();
        let _a2 = slots.take(&"a".into(), &cfg).unwrap();
        let why = slots.take(&"a".into(), &cfg).err().unwrap().to_string();
        assert!(why.contains("`a` already has 2 live connections"), "{why}");
        let _b1 = slots.take(&"b".into(), &cfg).unwrap();
        let why = slots.take(&"b".into(), &cfg).err().unwrap().to_string();
        assert!(why.contains("server already has 3"), "{why}");
        drop(a1);
        assert!(
            slots.take(&"b".into(), &cfg).is_ok(),
            "a closed feed frees its slot"
        );
    }
}
