//! The team's node placing the team file's agents over the live nodes
//! ([`cohort_core::placement`]): every look, the agents of a node that went away, and a share
//! for a node that joined, move. A move lets the agent go where it runs (its steps under way
//! land and are stored), grants its lease to the next node with the next token (refused unless
//! this node still holds the team's lease, in the same transaction), runs it there from the
//! record, and routes to it again the messages it had not taken. People, and the agents
//! managers hire, stay on the team's node.

use super::bus::Bus;
use super::core_calls::Grants;
use super::host::RELEASE_WITHIN;
use super::inbox;
use super::link::Link;
use super::stand_in::{Lost, StandIn};
use super::wire::{Hold, HostAnswer, HostRefusal, ToHost};
use crate::actors::{
    AgentActor, AgentFactory, AllPublished, Controls, Dispatcher, Register, RegisterControl,
    Retire, Route, SyncStateActor, Team,
};
use crate::monitor::Monitor;
use actix::prelude::*;
use cohort_core::ids::{AgentId, TaskId};
use cohort_core::lease::LeaseTerm;
use cohort_llm::ChatModel;
use cohort_store::lease::{Fence, NodeRow};
use cohort_store::{SqlStore, StoreError};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// Moves made side by side at most.
const MOVES_AT_ONCE: usize = 64;
/// How long a call to another node about a move waits for its answer.
const MOVE_DEADLINE: Duration = Duration::from_secs(10);

/// Where an agent runs.
#[derive(Clone)]
pub enum Place {
    Here(Addr<AgentActor>),
    On {
        node: String,
        /// The process serving as that node when the agent was placed there.
        instance: String,
        hold: Hold,
        stand_in: Addr<StandIn>,
    },
}

impl Place {
    fn node<'a>(&'a self, me: &'a str) -> &'a str {
        match self {
            Place::Here(_) => me,
            Place::On { node, .. } => node,
        }
    }
}

/// What moving an agent works with.
#[derive(Clone)]
struct Mover {
    me: String,
    fence: Fence,
    term: LeaseTerm,
    store: Arc<SqlStore>,
    link: Link,
    bus: Arc<Bus>,
    grants: Arc<Grants>,
    monitor: Monitor,
    dispatcher: Addr<Dispatcher>,
    sync: Addr<SyncStateActor>,
    factory: AgentFactory,
    models: Arc<HashMap<AgentId, Arc<dyn ChatModel>>>,
    base_task: TaskId,
    lost: Arc<Lost>,
    unreachable: Arc<Unreached>,
}

/// How long a node that did not take an agent is left out of the placement.
const UNREACHABLE_FOR: Duration = Duration::from_secs(10);

/// The node processes that did not take an agent lately, and when: alive in the store but not
/// reached over NATS, they get no agent (and keep none) for [`UNREACHABLE_FOR`]. Kept by
/// instance, not name: a node restarted under its name is another process (a node killed and
/// restarted at once was left out for 10 s because its dead self had not answered).
#[derive(Default)]
struct Unreached(std::sync::Mutex<HashMap<String, std::time::Instant>>);

impl Unreached {
    /// Marks the process serving as `n` as not reached, `at` that moment.
    fn mark(&self, n: &NodeRow, at: std::time::Instant) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(n.instance.clone(), at);
    }

    /// Whether the process serving as `n` took the last agent it was asked to run, or was
    /// asked long enough before `now` to be asked again.
    fn reached(&self, n: &NodeRow, now: std::time::Instant) -> bool {
        let mut marked = self.0.lock().unwrap_or_else(|e| e.into_inner());
        marked.retain(|_, at| now.saturating_duration_since(*at) < UNREACHABLE_FOR);
        !marked.contains_key(&n.instance)
    }
}

/// The team's node's placement of its agents.
pub struct Placer {
    mover: Mover,
    places: BTreeMap<AgentId, Place>,
}

impl Placer {
    /// The placer of `team` (all its agents on this node, `me`, so far), placing under `fence`.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        team: &Team,
        me: &str,
        fence: Fence,
        term: LeaseTerm,
        store: Arc<SqlStore>,
        link: Link,
        bus: Arc<Bus>,
        grants: Arc<Grants>,
    ) -> Placer {
        let places = team
            .agents
            .iter()
            .filter(|(id, _)| team.models.contains_key(*id))
            .map(|(id, addr)| (id.clone(), Place::Here(addr.clone())))
            .collect();
        Placer {
            mover: Mover {
                me: me.to_owned(),
                fence,
                term,
                store,
                link,
                bus,
                grants,
                monitor: team.monitor.clone(),
                dispatcher: team.dispatcher.clone(),
                sync: team.sync.clone(),
                factory: team.factory.clone(),
                models: Arc::new(team.models.clone()),
                base_task: team.base_task.clone(),
                lost: Arc::default(),
                unreachable: Arc::default(),
            },
            places,
        }
    }

    /// Where each agent runs now, by node.
    pub fn placement(&self) -> BTreeMap<AgentId, String> {
        let me = &self.mover.me;
        self.places
            .iter()
            .map(|(a, p)| (a.clone(), p.node(me).to_owned()))
            .collect()
    }

    /// Places the agents every `look` until `stop` resolves; gives itself back then.
    pub async fn run(mut self, look: Duration, stop: impl Future<Output = ()>) -> Self {
        let mut stop = std::pin::pin!(stop);
        self.claim_here().await;
        loop {
            // A stop ends a round under way: a move cut off half made leaves its agent in the
            // record, where whichever node runs the team next places it from (this one is
            // stopping its team).
            tokio::select! {
                r = self.round() => if let Err(e) = r {
                    tracing::warn!("placing the team's agents failed this time: {e}");
                },
                () = &mut stop => return self,
            }
            tokio::select! {
                () = tokio::time::sleep(look) => {}
                () = &mut stop => return self,
            }
        }
    }

    /// Takes the leases of the agents that run here from the start (the record says where
    /// every agent runs, and the next token of each is above any an older term granted).
    async fn claim_here(&self) {
        for (agent, place) in &self.places {
            if let Place::Here(_) = place {
                self.mover.grant_here(agent).await;
            }
        }
    }

    /// One look at the live nodes, and the moves it calls for.
    pub async fn round(&mut self) -> Result<usize, StoreError> {
        let (nodes, _) = self.mover.store.placement().await?;
        let live: BTreeMap<String, NodeRow> = nodes
            .into_iter()
            .filter(|n| n.name == self.mover.me || (self.mover.live(n) && self.mover.reached(n)))
            .map(|n| (n.name.clone(), n))
            .collect();
        let names: Vec<String> = live.keys().cloned().collect();
        let agents: Vec<AgentId> = self.places.keys().cloned().collect();
        // Where the agents run, but for those whose node went away (or restarted, or said it
        // no longer runs them): they are placed afresh.
        let away: Vec<AgentId> = self
            .places
            .iter()
            .filter(|(a, p)| self.mover.away(a, p, &live))
            .map(|(a, _)| a.clone())
            .collect();
        let mut current = self.placement();
        for a in &away {
            current.remove(a);
        }
        let want = cohort_core::placement::place(&agents, &names, &current);
        let moves: Vec<(AgentId, NodeRow)> = cohort_core::placement::moves(&current, &want)
            .into_iter()
            .map(|(a, n)| (a.clone(), live[n].clone()))
            .collect();
        let mut moved = 0;
        for chunk in moves.chunks(MOVES_AT_ONCE) {
            let done = futures::future::join_all(chunk.iter().map(|(agent, to)| {
                let from = self.places[agent].clone();
                let gone = away.contains(agent);
                self.mover
                    .clone()
                    .move_agent(agent.clone(), from, gone, to.clone())
            }))
            .await;
            for ((agent, _), place) in chunk.iter().zip(done) {
                if let Some(place) = place {
                    moved += 1;
                    self.places.insert(agent.clone(), place);
                }
            }
        }
        if moved > 0 {
            tracing::info!(
                moved,
                nodes = live.len(),
                "agents moved between the team's nodes"
            );
        }
        Ok(moved)
    }

    /// Lets every agent on another node go (this node stops): their steps under way land and
    /// are stored, so whichever node runs the team next carries on from the record. Waits at
    /// most `within` (as long as the steps here get): an agent not let go by then is carried on
    /// from the record as it is.
    pub async fn release_all(&mut self, within: Duration) {
        if tokio::time::timeout(within, self.release_each())
            .await
            .is_err()
        {
            tracing::warn!("some agents on other nodes were not let go within {within:?}");
        }
    }

    async fn release_each(&mut self) {
        let released = self.places.iter().filter_map(|(agent, place)| match place {
            Place::On { node, hold, .. } => {
                Some(self.mover.release(agent.clone(), node.clone(), *hold))
            }
            Place::Here(_) => None,
        });
        for (agent, r) in futures::future::join_all(released).await {
            if let Err(e) = r {
                tracing::warn!(%agent, "the agent's node did not let it go in time: {e}");
            }
        }
    }
}

impl Mover {
    /// Whether `agent`, placed at `place`, no longer runs there: its node is not live, is
    /// another process now (it restarted), or said it no longer runs it.
    fn away(&self, agent: &AgentId, place: &Place, live: &BTreeMap<String, NodeRow>) -> bool {
        let Place::On {
            node,
            instance,
            hold,
            ..
        } = place
        else {
            return false;
        };
        live.get(node).is_none_or(|n| &n.instance != instance) || self.lost.take(agent, *hold)
    }

    /// Whether node `n` may be given agents (see [`Unreached`]).
    fn reached(&self, n: &NodeRow) -> bool {
        self.unreachable.reached(n, std::time::Instant::now())
    }

    /// Whether node `n` is alive: heard from within the lease's term, and not stopped.
    fn live(&self, n: &NodeRow) -> bool {
        n.stopped_at.is_none() && (n.seen_ms_ago as u128) < self.term.ttl.as_millis()
    }

    /// Moves `agent` from `from` (`gone`: a node that went away) to `to`; its new place, or
    /// None if it stays where it was (it could not be let go in time, or not run there).
    async fn move_agent(
        self,
        agent: AgentId,
        from: Place,
        gone: bool,
        to: NodeRow,
    ) -> Option<Place> {
        match &from {
            // Stopped already (Err) is as good as let go.
            Place::Here(addr) => {
                if let Ok(false) = addr.send(Retire(RELEASE_WITHIN)).await {
                    return None;
                }
            }
            Place::On { node, hold, .. } if !gone => {
                let (_, r) = self.release(agent.clone(), node.clone(), *hold).await;
                if let Err(e) = r
                    && !matches!(e, HostRefusal::NotHere(_))
                {
                    tracing::warn!(%agent, "the agent's node did not let it go ({e}); it stays");
                    return None;
                }
            }
            Place::On { .. } => {}
        }
        // Whatever the agent did where it was is stored before its next node reads it: its
        // calls under way end, SyncState publishes what they handed over (it answers this only
        // after what it took before), and the store commits it all.
        if !self.grants.revoke(&agent, MOVE_DEADLINE).await {
            tracing::warn!(%agent, "the agent's calls under way did not end; it moves later");
            return self.back_here(agent).await;
        }
        if self.sync.send(AllPublished).await.is_err() {
            return None;
        }
        let version = self.monitor.assigned_version();
        if !matches!(
            tokio::time::timeout(MOVE_DEADLINE, self.monitor.durable(version)).await,
            Ok(true)
        ) {
            tracing::warn!(%agent, "the store did not confirm the agent's changes; it moves later");
            return self.back_here(agent).await;
        }
        let place = if to.name == self.me {
            self.back_here(agent.clone()).await
        } else {
            match self.run_on(&agent, &to).await {
                Some(p) => Some(p),
                None => self.back_here(agent.clone()).await,
            }
        };
        self.route_again(&agent);
        place
    }

    /// Asks `node` to let `agent` go.
    async fn release(&self, agent: AgentId, node: String, hold: Hold) -> (AgentId, HostAnswer) {
        let call = ToHost::Release {
            agent: agent.clone(),
            hold,
        };
        let answer = self.ask(&node, &call, RELEASE_WITHIN + MOVE_DEADLINE).await;
        (agent, answer)
    }

    async fn ask(&self, node: &str, call: &ToHost, deadline: Duration) -> HostAnswer {
        let payload = serde_json::to_vec(call).unwrap_or_default();
        let answer = self
            .link
            .ask(
                self.bus.names.host_subject(node),
                payload.into(),
                None,
                deadline,
            )
            .await
            .map_err(|e| HostRefusal::Failed(e.to_string()))?;
        serde_json::from_slice::<HostAnswer>(&answer)
            .map_err(|e| HostRefusal::Failed(format!("an unreadable answer: {e}")))?
    }

    /// Runs `agent` on node `to` from the record, under a new lease; None if it did not take it.
    async fn run_on(&self, agent: &AgentId, to: &NodeRow) -> Option<Place> {
        let state = self.monitor.read(|s| s.agents.get(agent).cloned())?;
        let token = self
            .store
            .grant_agent_lease(
                &self.fence,
                agent.as_str(),
                (&to.name, &to.instance),
                self.term.ttl,
            )
            .await
            .map_err(|e| tracing::warn!(%agent, "the agent's lease was not granted: {e}"))
            .ok()?;
        let hold = Hold {
            term: self.fence.token,
            token,
        };
        self.grants.set(agent.clone(), hold);
        self.clear_inbox(agent).await;
        let call = ToHost::Run {
            hold,
            record: Box::new(cohort_core::event::AgentRecord::of(&state)),
            base_task: self.base_task.clone(),
        };
        if let Err(e) = self.ask(&to.name, &call, MOVE_DEADLINE).await {
            tracing::warn!(%agent, node = %to.name, "the node did not run the agent ({e}); it stays here, and the node gets none for {UNREACHABLE_FOR:?}");
            self.unreachable.mark(to, std::time::Instant::now());
            self.grants.revoke(agent, MOVE_DEADLINE).await;
            return None;
        }
        let subject = self.bus.names.host_subject(&to.name);
        let way = (subject, self.link.clone(), self.bus.clone());
        let watch = (self.lost.clone(), self.grants.clone());
        let stand_in = StandIn::new(agent.clone(), hold, way, watch).start();
        self.dispatcher
            .do_send(RegisterControl(agent.clone(), Controls::of(&stand_in)));
        self.dispatcher
            .do_send(Register(agent.clone(), stand_in.clone().recipient()));
        tracing::info!(%agent, node = %to.name, token, "the agent runs on another node");
        Some(Place::On {
            node: to.name.clone(),
            instance: to.instance.clone(),
            hold,
            stand_in,
        })
    }

    /// Takes `agent`'s lease for this node (it runs here: the record says so).
    async fn grant_here(&self, agent: &AgentId) {
        let here = (self.me.as_str(), self.fence.instance.as_str());
        let granted = self
            .store
            .grant_agent_lease(&self.fence, agent.as_str(), here, self.term.ttl)
            .await;
        if let Err(e) = granted {
            tracing::warn!(%agent, "the agent's lease was not granted to this node: {e}");
        }
    }

    /// Starts `agent`'s inbox afresh for a new placement: the record routes again what the
    /// agent has not taken, in order, and a node it ran on before reads nothing more of it
    /// (what it still holds would only be dropped there, or refused by its stale lease).
    async fn clear_inbox(&self, agent: &AgentId) {
        let (bus, id) = (self.bus.clone(), agent.clone());
        let cleared = self.bus.spawn(async move { inbox::clear(&bus, &id).await });
        if let Ok(Err(e)) | Err(e) = cleared.await.map_err(|e| e.to_string()) {
            tracing::warn!(%agent, "the agent's inbox was not started afresh ({e}); older copies are dropped where it ran");
        }
    }

    /// Runs `agent` on this node again, from the record.
    async fn back_here(&self, agent: AgentId) -> Option<Place> {
        let state = self.monitor.read(|s| s.agents.get(&agent).cloned())?;
        let llm = self.models.get(&agent)?.clone();
        self.grant_here(&agent).await;
        self.clear_inbox(&agent).await;
        let mut prepared = self.factory.prepare(state, Some(&llm));
        crate::actors::resume_moved(&mut prepared, &llm);
        let sync = self.sync.clone();
        let addr = self
            .factory
            .spawn_restored(prepared, Some(llm), sync, false);
        Some(Place::Here(addr))
    }

    /// Routes to `agent` again the messages the record says it has not taken.
    fn route_again(&self, agent: &AgentId) {
        let waiting = self.monitor.read(|s| {
            s.deliveries
                .in_flight()
                .filter(|f| f.pending.contains(agent))
                .collect::<Vec<_>>()
        });
        for f in waiting {
            self.dispatcher.do_send(Route {
                message_no: f.message_no,
                message: f.message,
                to: Some(vec![agent.clone()]),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    fn node(name: &str, instance: &str) -> NodeRow {
        NodeRow {
            name: name.into(),
            instance: instance.into(),
            address: String::new(),
            team_hash: String::new(),
            started_at: 0,
            seen_ms_ago: 0,
            stopped_at: None,
        }
    }

    #[test]
    fn a_node_that_did_not_take_an_agent_is_left_out_until_its_time_is_up() {
        let unreached = Unreached::default();
        let (b, at) = (node("b", "b-1"), Instant::now());
        unreached.mark(&b, at);
        assert!(!unreached.reached(&b, at + Duration::from_secs(1)));
        assert!(unreached.reached(&b, at + UNREACHABLE_FOR));
    }

    #[test]
    fn a_node_restarted_under_its_name_is_not_left_out_for_its_dead_self() {
        let unreached = Unreached::default();
        let at = Instant::now();
        unreached.mark(&node("b", "b-1"), at);
        assert!(unreached.reached(&node("b", "b-2"), at + Duration::from_secs(1)));
        assert!(unreached.reached(&node("c", "c-1"), at));
    }
}
