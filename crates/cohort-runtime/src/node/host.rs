//! A node running agents for the team's node: it takes the [`ToHost`] calls on its own subject.
//! It runs an agent it is granted, carrying on from the state the team's record has (a step
//! its last node left running is settled as a restart settles it); it reads the agent's
//! JetStream inbox ([`super::inbox`]) for what the agent is sent; and it lets the agent go when
//! told,
//! once its steps under way have landed and are stored. The agent's own changes and hand-overs
//! go to the team's node ([`CoreLink`]).

use super::bus::Bus;
use super::link::Link;
use super::wire::{
    CoreAnswer, CoreCall, CoreRefusal, Hold, HostAnswer, HostRefusal, ToCore, ToHost,
};
use crate::actors::AgentKit;
use crate::actors::stop::Stop;
use crate::actors::{
    AgentActor, ApplyOutput, CancelStep, CheckTaskInstruction, Decide, Deliver, Outlet, Retire,
    SetPaused, SubmitMessages, SyncLink, Workers,
};
use actix::prelude::*;
use cohort_core::call::media::{Blob, BlobId};
use cohort_core::event::Change;
use cohort_core::ids::{AgentId, StepId, TaskId};
use cohort_core::state::AgentState;
use cohort_core::team::{Malformed, SyncError};
use cohort_llm::ChatModel;
use cohort_llm::recorded::{Call, CallOutcome};
use futures::FutureExt;
use futures::StreamExt;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a hand-over or a `Stored` call waits for the team's node.
const CORE_DEADLINE: Duration = Duration::from_secs(30);
/// How long an agent let go of has for its steps under way to land.
pub const RELEASE_WITHIN: Duration = Duration::from_secs(30);

/// An agent's way to the team's node, under its hold: its outlet, and (in a [`CoreProxy`]) its
/// link to SyncState.
pub struct CoreLink {
    agent: AgentId,
    hold: Hold,
    link: Link,
    subject: String,
    /// When the last glimpse of an answer being written went out (see [`WRITING_EVERY`]).
    wrote: Mutex<Option<std::time::Instant>>,
    /// This node's images and sounds (see [`NodeMedia`]).
    media: Arc<NodeMedia>,
}

/// The images and sounds the tools of this node's agents returned: held here (for their
/// models) and written straight to the team's store, which every node shares (a blob is too
/// large to pass through NATS, and the node running the team reads it from the store).
#[derive(Default)]
pub struct NodeMedia {
    held: crate::monitor::media::Media,
    store: Option<Arc<dyn cohort_store::Store>>,
}

impl NodeMedia {
    pub fn new(store: Option<Arc<dyn cohort_store::Store>>) -> NodeMedia {
        NodeMedia {
            held: Default::default(),
            store,
        }
    }
}

/// The least time between two glimpses of an answer being written that an agent on another
/// node sends: a model streams many chunks a second, and each would be a message to the
/// team's node (the step's result carries the whole answer anyway).
const WRITING_EVERY: Duration = Duration::from_millis(250);

impl CoreLink {
    fn payload(&self, call: CoreCall) -> bytes::Bytes {
        let call = ToCore {
            agent: self.agent.clone(),
            hold: self.hold,
            call,
        };
        serde_json::to_vec(&call).unwrap_or_default().into()
    }

    /// Asks the team's node, answered with its answer (or why there is none).
    fn ask(&self, call: CoreCall) -> impl Future<Output = CoreAnswer> + Send + use<> {
        let traceparent = call.traceparent();
        let payload = self.payload(call);
        let asked = self
            .link
            .ask(self.subject.clone(), payload, traceparent, CORE_DEADLINE);
        async move {
            let answer = asked
                .await
                .map_err(|e| CoreRefusal::Unavailable(e.to_string()))?;
            serde_json::from_slice::<CoreAnswer>(&answer)
                .map_err(|e| CoreRefusal::Unavailable(format!("an unreadable answer: {e}")))?
        }
    }
}

impl Outlet for CoreLink {
    fn publish(&self, changes: Vec<Change>) {
        if !changes.is_empty() {
            let payload = self.payload(CoreCall::Publish { changes });
            self.link.tell(self.subject.clone(), payload);
        }
    }

    fn stored(&self) -> BoxFuture<'static, bool> {
        self.ask(CoreCall::Stored { taken: None })
            .map(|a| a.is_ok())
            .boxed()
    }

    fn writing(&self, _agent: &AgentId, step: &StepId, text: &str) {
        {
            let mut wrote = self.wrote.lock().unwrap_or_else(|e| e.into_inner());
            let now = std::time::Instant::now();
            if wrote.is_some_and(|at| now.duration_since(at) < WRITING_EVERY) {
                return;
            }
            *wrote = Some(now);
        }
        let payload = self.payload(CoreCall::Writing {
            step: step.clone(),
            text: text.to_owned(),
        });
        self.link.tell(self.subject.clone(), payload);
    }

    /// Not known here (agents are hired on the team's node): the answer's schema lists none,
    /// and SyncState checks the receivers.
    fn receivers(&self, _at_most: usize) -> Vec<String> {
        Vec::new()
    }

    fn keep_blob(&self, blob: Blob) {
        self.media.held.keep(blob.clone(), false);
        if let Some(store) = self.media.store.clone() {
            tokio::spawn(async move {
                let id = blob.id.clone();
                if let Err(e) = store.put_blob(blob).await {
                    tracing::warn!(blob = %id, "an image or sound a tool returned was not stored: {e}");
                }
            });
        }
    }

    fn blob(&self, id: &BlobId) -> Option<Arc<Blob>> {
        self.media.held.get(id)
    }
}

/// SyncState, for an agent on this node: its hand-overs, passed on to the team's node. A
/// hand-over that finds no answer, or is refused as not held, stops the proxy, so the agent
/// learns that SyncState cannot be reached (and starts nothing more), and this node lets the
/// agent go: the team's node, told so by the next message it sends it, runs it again from the
/// record.
pub struct CoreProxy(Arc<CoreLink>, std::sync::Weak<HostInner>);

impl Actor for CoreProxy {
    type Context = Context<Self>;
}

impl CoreProxy {
    fn pass_on(&self, call: CoreCall) -> ResponseActFuture<Self, Result<(), SyncError>> {
        let asked = self.0.ask(call);
        Box::pin(asked.into_actor(self).map(|answer, act, ctx| match answer {
            Ok(()) => Ok(()),
            Err(CoreRefusal::Sync(e)) => Err(e),
            Err(e) => {
                tracing::warn!(agent = %act.0.agent, "the team's node did not take a hand-over: {e}; the agent stops here");
                if let Some(host) = act.1.upgrade() {
                    host.forget(&act.0.agent, act.0.hold);
                }
                ctx.stop();
                // Never seen: the stopped proxy drops the answer, and the agent sees it closed.
                Err(SyncError::Invalid(Malformed::HandOver(e.to_string())))
            }
        }))
    }
}

impl Handler<ApplyOutput> for CoreProxy {
    type Result = ResponseActFuture<Self, Result<(), SyncError>>;
    fn handle(&mut self, m: ApplyOutput, _: &mut Context<Self>) -> Self::Result {
        self.pass_on(CoreCall::Apply {
            output: Box::new(m.output),
            held: m.held,
            settle: m.settle.map(Box::new),
        })
    }
}

impl Handler<SubmitMessages> for CoreProxy {
    type Result = ResponseActFuture<Self, Result<(), SyncError>>;
    fn handle(&mut self, m: SubmitMessages, _: &mut Context<Self>) -> Self::Result {
        self.pass_on(CoreCall::Submit {
            messages: m.messages,
            held: m.held,
        })
    }
}

impl Handler<CheckTaskInstruction> for CoreProxy {
    type Result = ResponseActFuture<Self, Result<(), SyncError>>;
    fn handle(&mut self, m: CheckTaskInstruction, _: &mut Context<Self>) -> Self::Result {
        self.pass_on(CoreCall::Check {
            instruction: m.instruction,
        })
    }
}

/// An agent running here.
struct Hosted {
    hold: Hold,
    addr: Addr<AgentActor>,
    core: Arc<CoreLink>,
    /// Reading its inbox; stops when the agent leaves this node.
    _inbox: InboxReading,
}

/// The reading of one agent's inbox, stopped when dropped.
struct InboxReading(tokio::task::JoinHandle<()>);

impl Drop for InboxReading {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// An agent here as its inbox's reader sees it: messages go to its actor, and its receipt is
/// stored once the team's node has stored what the agent sent it.
struct AgentInbox {
    addr: Addr<AgentActor>,
    core: Arc<CoreLink>,
}

impl super::inbox::Receiver for AgentInbox {
    async fn deliver(&self, no: u64, message: cohort_core::message::Message) -> bool {
        self.addr.send(Deliver(no, Arc::new(message))).await.is_ok()
    }

    async fn stored(&self, seq: u64) -> bool {
        let asked = self.core.ask(CoreCall::Stored { taken: Some(seq) });
        asked.await.is_ok()
    }
}

/// What this node runs agents with: the same settings and models as the team's node.
pub struct HostParts {
    pub kit: AgentKit,
    /// Each agent of the team file's model.
    pub models: HashMap<AgentId, Arc<dyn ChatModel>>,
    pub workers: Arc<Workers>,
    /// The models' call log, which forwards each call to the team's node.
    pub calls: Arc<cohort_llm::recorded::CallLog>,
    /// The images and sounds its agents' tools return.
    pub media: Arc<NodeMedia>,
}

impl HostParts {
    /// The parts of a node that runs team file `cfg`'s agents for the team's node: the same
    /// prompts, settings and models, and MCP servers of its own. Must run inside an actix
    /// system.
    pub fn build(
        cfg: &cohort_core::config::TeamConfig,
        host: &crate::actors::Host,
        store: Option<Arc<dyn cohort_store::Store>>,
    ) -> Result<HostParts, crate::actors::SystemError> {
        let cfg = &cfg.with_env(host.vars);
        let prompts = Arc::new(cfg.prompt_set()?);
        let mut builder = crate::actors::ModelBuilder::new(host.vars, cfg.waits.model);
        let (models, _) = crate::actors::build_models(cfg, &mut builder)?;
        let named = crate::actors::named_models(cfg, &mut builder)?;
        let tools = crate::actors::agent_tools(cfg, host, prompts.texts());
        // The base task is the record's: each run is told it.
        let base_task = TaskId::from("");
        let steps = crate::actors::StepAllowance::unlimited();
        Ok(HostParts {
            kit: crate::actors::agent_kit(cfg, (prompts, named), tools, base_task, steps),
            models: cfg
                .agents
                .iter()
                .map(|a| a.id.clone())
                .zip(models)
                .collect(),
            workers: Arc::new(Workers::start()),
            calls: builder.calls.clone(),
            media: Arc::new(NodeMedia::new(store)),
        })
    }
}

/// This node's agents, running for the team's node.
#[derive(Clone)]
pub struct AgentHost {
    inner: Arc<HostInner>,
}

struct HostInner {
    parts: HostParts,
    link: Link,
    bus: Arc<Bus>,
    core_subject: String,
    agents: Mutex<HashMap<AgentId, Hosted>>,
}

impl AgentHost {
    /// Takes the team's node's calls on this node's subject (`node`), until the returned
    /// handle is dropped. Must run inside an actix system.
    pub async fn start(
        bus: &Arc<Bus>,
        link: Link,
        node: &str,
        parts: HostParts,
    ) -> Result<(AgentHost, tokio::task::JoinHandle<()>), super::link::LinkError> {
        let mut calls = bus
            .client
            .subscribe(bus.names.host_subject(node))
            .await
            .map_err(|e| super::link::LinkError::Start(e.to_string()))?;
        // The server has the subscription once this returns: a call sent after it is heard.
        bus.client
            .flush()
            .await
            .map_err(|e| super::link::LinkError::Start(e.to_string()))?;
        let host = AgentHost {
            inner: Arc::new(HostInner {
                parts,
                link,
                bus: bus.clone(),
                core_subject: bus.names.core_subject.clone(),
                agents: Mutex::default(),
            }),
        };
        let weak = Arc::downgrade(&host.inner);
        let forwards = host
            .inner
            .parts
            .calls
            .forward_to(Box::new(move |call, model, outcome| {
                if let Some(inner) = weak.upgrade() {
                    inner.called(call, model, outcome);
                }
            }));
        debug_assert!(forwards, "a node's call log forwards to one host");
        let client = bus.client.clone();
        let serving = host.clone();
        let task = actix::spawn(async move {
            while let Some(m) = calls.next().await {
                let answer = match serde_json::from_slice::<ToHost>(&m.payload) {
                    Ok(call) => serving.answer(call),
                    Err(e) => {
                        let why = format!("a call from the team's node could not be read: {e}");
                        futures::future::ready(Err(HostRefusal::Failed(why))).boxed()
                    }
                };
                let client = client.clone();
                // Answered as it comes: a verdict or a release that waits holds up nothing.
                actix::spawn(async move {
                    let answer = answer.await;
                    if let Some(reply) = m.reply {
                        let json = serde_json::to_vec(&answer).unwrap_or_default();
                        if let Err(e) = client.publish(reply, json.into()).await {
                            tracing::warn!("an answer to the team's node was not sent: {e}");
                        }
                    }
                });
            }
        });
        Ok((host, task))
    }

    /// The agents running here.
    pub fn agents(&self) -> Vec<AgentId> {
        self.inner.lock().keys().cloned().collect()
    }

    /// Does `call` (what can be done at once is done before the next call is read); the
    /// future is its answer.
    fn answer(&self, call: ToHost) -> BoxFuture<'static, HostAnswer> {
        let agent = call.agent().clone();
        let addr = match call.hold() {
            None => None,
            Some(hold) => match self.inner.lock().get(&agent) {
                Some(h) if h.hold == hold => Some(h.addr.clone()),
                _ => return futures::future::ready(Err(HostRefusal::NotHere(agent))).boxed(),
            },
        };
        let ready = |r: HostAnswer| futures::future::ready(r).boxed();
        match (call, addr) {
            (
                ToHost::Run {
                    hold,
                    record,
                    base_task,
                },
                _,
            ) => ready(self.run(hold, record.into_state(), base_task)),
            (
                ToHost::Decide {
                    step_id,
                    by,
                    verdict,
                    ..
                },
                Some(addr),
            ) => async move {
                match addr
                    .send(Decide {
                        step_id,
                        by,
                        verdict,
                    })
                    .await
                {
                    Ok(r) => r.map_err(HostRefusal::Verdict),
                    Err(e) => Err(HostRefusal::Failed(e.to_string())),
                }
            }
            .boxed(),
            (
                ToHost::Cancel {
                    step_id,
                    by,
                    reason,
                    ..
                },
                Some(addr),
            ) => async move {
                match addr
                    .send(CancelStep {
                        step_id,
                        by,
                        reason,
                    })
                    .await
                {
                    Ok(r) => r.map_err(HostRefusal::Cancel),
                    Err(e) => Err(HostRefusal::Failed(e.to_string())),
                }
            }
            .boxed(),
            (ToHost::Pause { paused, .. }, Some(addr)) => {
                addr.do_send(SetPaused(paused));
                ready(Ok(()))
            }
            (ToHost::Release { .. }, Some(_)) => self.release(agent).boxed(),
            (_, None) => ready(Err(HostRefusal::NotHere(agent))),
        }
    }

    /// Runs `state`'s agent under `hold` (replacing any run of it here under an older hold).
    fn run(&self, hold: Hold, state: AgentState, base_task: TaskId) -> HostAnswer {
        let agent = state.agent_id.clone();
        let parts = &self.inner.parts;
        let Some(llm) = parts.models.get(&agent).cloned() else {
            return Err(HostRefusal::Failed(format!(
                "agent `{agent}` is not in this node's team file"
            )));
        };
        {
            let mut agents = self.inner.lock();
            if let Some(old) = agents.remove(&agent) {
                tracing::warn!(%agent, "the agent was granted here again; its older run stops");
                old.addr.do_send(Stop);
            }
            // Granted by a newer term of the team's node: what the older one placed here is
            // not the record's any more (that node is gone; the new one places from the record).
            agents.retain(|a, h| {
                let stale = h.hold.term < hold.term;
                if stale {
                    tracing::warn!(agent = %a, "placed here by a team's node that is gone; stopped");
                    h.addr.do_send(Stop);
                }
                !stale
            });
        }
        let mut kit = parts.kit.clone();
        kit.settings.base_task = Some(base_task);
        let mut prepared = kit.prepare(state, Some(&llm));
        crate::actors::resume_moved(&mut prepared, &llm);
        let core = Arc::new(CoreLink {
            agent: agent.clone(),
            hold,
            link: self.inner.link.clone(),
            subject: self.inner.core_subject.clone(),
            wrote: Mutex::default(),
            media: parts.media.clone(),
        });
        let arbiter = parts.workers.pick();
        let proxy = CoreProxy::start_in_arbiter(&arbiter, {
            let (core, host) = (core.clone(), Arc::downgrade(&self.inner));
            move |_| CoreProxy(core, host)
        });
        let outlet: Arc<dyn Outlet> = core.clone();
        let actor = kit.actor(prepared, Some(llm), SyncLink::to(&proxy), outlet);
        let addr = AgentActor::start_in_arbiter(&arbiter, move |_| actor);
        let reader = AgentInbox {
            addr: addr.clone(),
            core: core.clone(),
        };
        let (bus, id) = (self.inner.bus.clone(), agent.clone());
        let inbox = InboxReading(
            self.inner
                .bus
                .spawn(async move { super::inbox::read(&bus, &id, hold, reader).await }),
        );
        tracing::info!(%agent, token = hold.token, "the agent runs on this node");
        let hosted = Hosted {
            hold,
            addr,
            core,
            _inbox: inbox,
        };
        self.inner.lock().insert(agent, hosted);
        Ok(())
    }

    /// Lets `agent` go: once its steps under way have landed and everything it did is stored.
    fn release(&self, agent: AgentId) -> impl Future<Output = HostAnswer> + Send + use<> {
        let host = self.clone();
        async move {
            let Some((addr, core)) = host
                .inner
                .lock()
                .get(&agent)
                .map(|h| (h.addr.clone(), h.core.clone()))
            else {
                return Err(HostRefusal::NotHere(agent));
            };
            let stopped = addr.send(Retire(RELEASE_WITHIN)).await.unwrap_or(true);
            if !stopped {
                return Err(HostRefusal::Failed(format!(
                    "agent `{agent}`'s steps under way did not land within {RELEASE_WITHIN:?}"
                )));
            }
            host.inner.lock().remove(&agent);
            core.ask(CoreCall::Stored { taken: None })
                .await
                .map_err(|e| HostRefusal::Failed(e.to_string()))
        }
    }

    /// Lets every agent here go (this node stops, or runs the team itself now), each once its
    /// steps under way have landed; true if all of them did and were stored.
    pub async fn release_all(&self) -> bool {
        let all = futures::future::join_all(self.agents().into_iter().map(|a| self.release(a)));
        all.await.iter().all(Result::is_ok)
    }

    /// Stops every agent here at once (the team's node is gone: what they did since it went
    /// is not stored, and their next node carries on from the record).
    pub fn drop_all(&self) {
        for (_, h) in self.inner.lock().drain() {
            h.addr.do_send(Stop);
        }
    }
}

impl HostInner {
    /// Stops `agent` if it runs here under `hold`.
    fn forget(&self, agent: &AgentId, hold: Hold) {
        let mut agents = self.lock();
        if agents.get(agent).is_some_and(|h| h.hold == hold)
            && let Some(h) = agents.remove(agent)
        {
            h.addr.do_send(Stop);
        }
    }

    /// Sends a model call of an agent here to the team's node, under the agent's hold. The
    /// call of an agent let go of meanwhile is not sent (it is lost to the step view and the
    /// traces: a let-go agent's steps have landed, so only an abandoned call can end so late).
    fn called(&self, call: Call, model: &str, outcome: CallOutcome) {
        let core = self.lock().get(&call.agent_id).map(|h| h.core.clone());
        if let Some(core) = core {
            let call = CoreCall::Called {
                record: Box::new(call),
                model: model.to_owned(),
                outcome,
            };
            core.link.tell(core.subject.clone(), core.payload(call));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<AgentId, Hosted>> {
        self.agents.lock().unwrap_or_else(|e| e.into_inner())
    }
}
