//! The bodies of the repair rules that mend a skill's answer, grouped by what they mend; the
//! rules' names, switches, thresholds and presets are the catalog `policy::repairs`. Each body
//! is called where its skill reads the answer, only when the policy allows the rule, and the
//! firing says what it changed.
//!
//! They sit under `skills`, not beside the catalog in `policy`: they read the agent's steps and
//! the skills' answers, and the model layer (`state`, `message`) depends on `policy` for the
//! catalog, so bodies there would make an import circle.

pub mod echo;
pub mod instructions;
pub mod plans;
pub mod summaries;
mod words;
