//! Helpers the suite's modules share: scratch folders, stub servers, fixture teams, checks.

pub mod api_team;
pub mod competent;
pub mod http;
pub mod ledger;
pub mod mcp;
pub mod nats;
pub mod openai_stub;
pub mod postgres;
pub mod prompt_fields;
pub mod rooms;
pub mod scratch;
pub mod served;
pub mod states;
