//! Pure decisions about what agents may do on their own: how risky a tool call is, whether it
//! must wait for a person's approval first, and which of a model's slips the runtime mends.

mod approval;
pub mod echo;
pub mod repairs;
mod risk;
pub mod tool_retry;

pub use approval::{ApprovalPolicy, args_hash};
pub use repairs::{Fired, Preset, Repair, Repairs, Thresholds};
pub use risk::{Risk, RiskOverrides, ToolRisk, judge};
