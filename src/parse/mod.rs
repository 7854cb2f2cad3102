//! LLM answer text → typed skill answers (being written).
