//! Pure decisions about what agents may do on their own: how risky a tool call is, and whether
//! it must wait for a person's approval first.

mod approval;
mod judged;
mod risk;

pub use approval::{ApprovalPolicy, args_hash};
pub use judged::{judge_prompt, with_judgement};
pub use risk::{Risk, RiskOverrides, ToolRisk, judge};
