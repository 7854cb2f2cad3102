//! In a replay (`cohort replay`), the agent takes its messages and starts the steps that ask
//! its model in the order the record has them among its asks and answers (see
//! `llm::replay`): a message whose turn has not come is held, with every message after it,
//! and taken once the record's order allows; a step waits for the messages its call had been
//! asked with. A wait past the record's patience goes ahead, is counted as out of turn, and
//! leaves the agent to go on as things come. Outside a replay nothing is held.

use super::AgentActor;
use actix::prelude::*;
use cohort_core::message::Message;
use cohort_llm::replay::Record;
use std::collections::VecDeque;
use std::sync::Arc;

/// What the agent holds for the record's order.
#[derive(Default)]
pub(super) struct Turns {
    /// The record, in a replay.
    record: Option<Arc<Record>>,
    /// Messages held until their turn, in the order they came.
    held: VecDeque<(u64, Arc<Message>)>,
    /// A wait for the first held message's turn is under way.
    waiting_to_take: bool,
    /// A wait for the next step's turn is under way.
    waiting_to_start: bool,
    /// The last wait for a step's turn ran out: the next step starts without its turn.
    start_anyway: bool,
}

impl Turns {
    /// Turns kept by `record` (a replay), or none.
    pub(super) fn of(record: Option<Arc<Record>>) -> Self {
        Turns {
            record,
            ..Turns::default()
        }
    }

    /// Whether the agent runs in a replay.
    pub(super) fn replaying(&self) -> bool {
        self.record.is_some()
    }

    /// The agent started what it could: a wait that ran out lets no later step skip its turn.
    pub(super) fn started(&mut self) {
        self.start_anyway = false;
    }

    /// The agent took a message: a replay's answers and steps waiting for it look again.
    pub(super) fn took_message(&self) {
        if let Some(record) = &self.record {
            record.took_message();
        }
    }
}

impl AgentActor {
    /// Takes message `no` now, or, in a replay, once its turn came (after any held before it).
    pub(super) fn take_in_turn(&mut self, no: u64, m: Arc<Message>, ctx: &mut Context<Self>) {
        if self.turns.record.is_none() {
            return self.take(no, m, ctx);
        }
        self.turns.held.push_back((no, m));
        if !self.turns.waiting_to_take {
            self.take_held(false, ctx);
        }
    }

    /// Takes the held messages whose turn came (the first one whatever its turn, when
    /// `anyway`: its wait ran out), then waits for the next one's.
    fn take_held(&mut self, mut anyway: bool, ctx: &mut Context<Self>) {
        let Some(record) = self.turns.record.clone() else {
            return;
        };
        while let Some((no, m)) = self.turns.held.front().cloned() {
            let k = self.intake.taken() + 1;
            if !std::mem::take(&mut anyway) && !record.may_take(&self.state.agent_id, k) {
                self.turns.waiting_to_take = true;
                let agent = self.state.agent_id.clone();
                let wait = async move { record.until_for(&agent, |r| r.may_take(&agent, k)).await };
                ctx.spawn(wait.into_actor(self).map(|came, act, ctx| {
                    act.turns.waiting_to_take = false;
                    act.take_held(!came, ctx);
                }));
                return;
            }
            self.turns.held.pop_front();
            self.take(no, m, ctx);
        }
    }

    /// Whether the agent may start its next step now, which asks its model when `asks_model`:
    /// always outside a replay; in one, once it has taken the messages the record's call of
    /// that step was asked with (else it waits for them, and tries again).
    pub(super) fn step_in_turn(&mut self, asks_model: bool, ctx: &mut Context<Self>) -> bool {
        let Some(record) = self.turns.record.clone() else {
            return true;
        };
        let agent = self.state.agent_id.clone();
        if !asks_model
            || std::mem::take(&mut self.turns.start_anyway)
            || record.may_start(&agent, self.intake.taken())
        {
            return true;
        }
        if !self.turns.waiting_to_start {
            self.turns.waiting_to_start = true;
            let intake = self.intake.clone();
            let wait = async move {
                record
                    .until_for(&agent, |r| r.may_start(&agent, intake.taken()))
                    .await
            };
            ctx.spawn(wait.into_actor(self).map(|came, act, ctx| {
                act.turns.waiting_to_start = false;
                act.turns.start_anyway = !came;
                act.try_run(ctx);
            }));
        }
        false
    }
}
