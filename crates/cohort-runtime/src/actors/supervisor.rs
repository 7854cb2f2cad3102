//! The Supervisor: the one actor that starts agents a manager hires (init_new_agent) and wires
//! them in. SyncState decides a hire and asks for it; the supervisor builds the agent from its
//! template with the `AgentFactory`, starts it on a worker thread and registers it with the
//! dispatcher before it answers, so SyncState can route to the new agent right after.

use super::factory::AgentFactory;
use super::sync_state::SyncStateActor;
use actix::prelude::*;
use cohort_core::event::Change;
use cohort_core::team::Member;

pub struct Supervisor {
    factory: AgentFactory,
    /// Given to every agent it starts (set once SyncState runs).
    sync: Option<Addr<SyncStateActor>>,
}

impl Supervisor {
    pub fn new(factory: AgentFactory) -> Self {
        Supervisor {
            factory,
            sync: None,
        }
    }
}

impl Actor for Supervisor {
    type Context = Context<Self>;
}

/// Tells the supervisor which SyncState its agents report to.
#[derive(Message)]
#[rtype(result = "()")]
pub struct Wire(pub Addr<SyncStateActor>);

/// Start an agent from its template (it is on SyncState's roster already); answered once it is
/// registered with the dispatcher, with the change that adds it (for SyncState to store with
/// the hire), or with why it could not start.
#[derive(Message)]
#[rtype(result = "Result<Change, String>")]
pub struct Hire(pub Member);

impl Handler<Wire> for Supervisor {
    type Result = ();
    fn handle(&mut self, Wire(sync): Wire, _: &mut Context<Self>) {
        self.sync = Some(sync);
    }
}

impl Handler<Hire> for Supervisor {
    type Result = Result<Change, String>;
    fn handle(&mut self, Hire(m): Hire, _: &mut Context<Self>) -> Self::Result {
        let sync = self
            .sync
            .clone()
            .ok_or_else(|| "the supervisor is not wired to SyncState yet".to_owned())?;
        self.factory
            .spawn_member(&m, sync)
            .map(|(_, added)| added)
            .ok_or_else(|| {
                format!(
                    "no template `{:?}` to start agent `{}` from",
                    m.template, m.id
                )
            })
    }
}
