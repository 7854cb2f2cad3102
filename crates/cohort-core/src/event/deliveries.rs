//! The messages in flight: routed (their record is stored) but not yet taken by every
//! receiver. SyncState numbers each message it routes (`TaskChange::Conversation`'s
//! `message_no`); a receiver acknowledges it in the same commit as what it did with it
//! (`AgentChange::Received`). After a restart the messages still in flight are delivered again
//! to the receivers that had not taken them: a crash between a send and its receipt loses no
//! message and delivers none twice.

use crate::ids::AgentId;
use crate::message::Message;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// A message some receivers have not taken yet (as the store's record keeps it, and as it is
/// routed again after a restart).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InFlight {
    /// The number SyncState gave the message as it routed it.
    pub message_no: u64,
    /// The message itself.
    pub message: Arc<Message>,
    /// The receivers that have not taken it, in the message's order.
    pub pending: Vec<AgentId>,
}

/// How many messages may be in flight before the oldest is given up (logged). Receivers take
/// their messages within milliseconds; this many waiting means receipts are not coming.
pub const IN_FLIGHT_KEPT: usize = 100_000;

#[derive(Clone, Debug, PartialEq)]
struct Flight {
    message: Arc<Message>,
    /// Receipts still to come.
    left: usize,
}

/// The ledger. Each receiver takes its messages in the order they were numbered (the
/// dispatcher routes in that order, a mailbox is first in, first out, and a restart routes
/// what is in flight first), so one mark per agent, the newest number it took, says which
/// messages it has: a receipt costs no search through a broadcast's receivers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Deliveries {
    in_flight: BTreeMap<u64, Flight>,
    /// Per receiver, the newest message number it took.
    marks: HashMap<AgentId, u64>,
    /// The newest message number routed (SyncState numbers on from here after a restart).
    last_no: u64,
}

impl Deliveries {
    /// The ledger after a restart, from the messages still in flight and the newest number
    /// routed.
    pub fn restore(in_flight: Vec<InFlight>, last_no: u64) -> Self {
        let mut d = Deliveries {
            last_no,
            ..Default::default()
        };
        // A receiver took everything before the first message it has not taken.
        for mut f in in_flight {
            if f.message.body.is_none() {
                Arc::make_mut(&mut f.message).upgrade_stored();
            }
            for r in &f.pending {
                d.marks.entry(r.clone()).or_insert(f.message_no - 1);
            }
            d.in_flight.insert(
                f.message_no,
                Flight {
                    left: f.pending.len(),
                    message: f.message,
                },
            );
        }
        d
    }

    /// Message `no` was routed to its receivers.
    pub fn sent(&mut self, no: u64, message: &Arc<Message>) {
        self.last_no = self.last_no.max(no);
        if message.receiver.is_empty() {
            return;
        }
        self.in_flight.insert(
            no,
            Flight {
                message: message.clone(),
                left: message.receiver.len(),
            },
        );
        while self.in_flight.len() > IN_FLIGHT_KEPT {
            if let Some((no, f)) = self.in_flight.pop_first() {
                tracing::error!(
                    "message {no} to {:?} was never taken by all its receivers; it is no \
                     longer delivered again after a restart",
                    f.message.receiver
                );
            }
        }
    }

    /// `agent` took message `no`.
    pub fn received(&mut self, no: u64, agent: &AgentId) {
        match self.marks.get_mut(agent) {
            Some(m) => *m = (*m).max(no),
            None => {
                self.marks.insert(agent.clone(), no);
            }
        }
        if let Some(f) = self.in_flight.get_mut(&no) {
            f.left = f.left.saturating_sub(1);
            if f.left == 0 {
                self.in_flight.remove(&no);
            }
        }
    }

    /// The messages in flight, oldest first, each with the receivers that have not taken it.
    pub fn in_flight(&self) -> impl Iterator<Item = InFlight> + '_ {
        self.in_flight.iter().map(|(no, f)| InFlight {
            message_no: *no,
            message: f.message.clone(),
            pending: f
                .message
                .receiver
                .iter()
                .filter(|r| self.marks.get(*r).is_none_or(|m| m < no))
                .cloned()
                .collect(),
        })
    }

    /// How many messages are in flight.
    pub fn in_flight_count(&self) -> usize {
        self.in_flight.len()
    }

    /// The newest message number routed.
    pub fn last_no(&self) -> u64 {
        self.last_no
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::StageRef;

    fn msg(to: &[&str]) -> Arc<Message> {
        Arc::new(Message::notice(
            "t".into(),
            "a".into(),
            to.iter().map(|r| AgentId::from(*r)).collect(),
            StageRef::NoRelative,
            "hi".into(),
        ))
    }

    #[test]
    fn a_message_stays_in_flight_until_every_receiver_took_it() {
        let mut d = Deliveries::default();
        d.sent(1, &msg(&["b", "c"]));
        d.sent(2, &msg(&["b"]));
        d.received(1, &"b".into());
        let left: Vec<_> = d.in_flight().map(|f| (f.message_no, f.pending)).collect();
        assert_eq!(left, vec![(1, vec!["c".into()]), (2, vec!["b".into()])]);
        d.received(1, &"c".into());
        d.received(2, &"b".into());
        assert_eq!(d.in_flight().count(), 0);
        assert_eq!(d.last_no(), 2, "numbering goes on from the newest");
        // A receipt of something not in flight (taken before a restart) changes nothing.
        d.received(2, &"b".into());
        assert_eq!(d.in_flight().count(), 0);
    }

    #[test]
    fn the_oldest_message_in_flight_is_given_up_over_the_cap() {
        let mut d = Deliveries::default();
        for no in 1..=(IN_FLIGHT_KEPT as u64 + 2) {
            d.sent(no, &msg(&["b"]));
        }
        assert_eq!(d.in_flight_count(), IN_FLIGHT_KEPT);
        assert_eq!(d.in_flight().next().unwrap().message_no, 3);
    }

    #[test]
    fn a_restored_ledger_knows_who_still_has_to_take_what() {
        let mut d = Deliveries::default();
        d.sent(1, &msg(&["b", "c"]));
        d.sent(2, &msg(&["b", "c"]));
        d.received(1, &"b".into());
        let record: Vec<InFlight> = d.in_flight().collect();
        let mut back = Deliveries::restore(record.clone(), d.last_no());
        assert_eq!(back.in_flight().collect::<Vec<_>>(), record);
        back.received(2, &"b".into());
        back.received(1, &"c".into());
        back.received(2, &"c".into());
        assert_eq!(back.in_flight_count(), 0);
    }
}
