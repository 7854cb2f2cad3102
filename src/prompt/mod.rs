//! Prompt sets and prompt assembly (being written).
