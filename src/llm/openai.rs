//! The `openai` provider (being written).
