//! Thin actix shells around the pure core: one actor per agent, SyncState (owner of tasks and
//! stages), the Dispatcher (routes messages in order), the Supervisor (starts hired agents),
//! the Watchdog (finds stalled tasks), the System that wires a team, and stopping it in order.

mod agent;
mod allowance;
mod dispatcher;
mod factory;
pub mod stop;
mod supervisor;
mod sync_state;
mod system;
mod watchdog;

pub use agent::{
    AgentActor, AgentTools, CancelStep, Decide, Deliver, GetAgentSettings, GetAgentState,
    HumanSend, Outlet, Retire, SendRefused, SetPaused, SyncLink,
};
pub use allowance::StepAllowance;
pub use dispatcher::{
    CancelStepFor, ControlRefused, Controls, DecideFor, Dispatcher, PauseFor, Register,
    RegisterControl, Route,
};
pub use factory::{AgentFactory, AgentKit, ModelBuilder, Workers};
pub use supervisor::{Hire, Supervisor, Wire};
pub use sync_state::{
    AllPublished, ApplyOutput, CancelStage, CancelTask, CheckRoom, CheckTaskInstruction,
    MarkForked, PauseTask, ReportStall, RetryStage, SubmitMessage, SubmitMessages, SyncStateActor,
};
pub use system::{
    Host, MONITOR_BUFFER, OPERATOR, SystemError, Team, agent_kit, agent_tools, answered_in,
    build_models, named_models, resume_moved, start_team, start_team_limited, start_team_stored,
};
pub use watchdog::Watchdog;
