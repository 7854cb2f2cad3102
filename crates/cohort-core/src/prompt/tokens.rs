//! Counting a text's tokens for one model: exactly, with the model's own tokenizer when its
//! name says which (OpenAI's GPT and o-series, Qwen, Llama, DeepSeek, Mistral; vocabularies
//! embedded in the binary), else estimated (about four characters a token, one for a CJK
//! character). Prompts are built under a model's context window with it, and a reply whose
//! endpoint reports no usage is counted with it.

use std::fmt;

/// How one model's tokens are counted: exactly with its tokenizer, or estimated. Cheap to copy.
#[derive(Clone, Copy)]
pub enum TokenCounter {
    /// No known tokenizer: [`estimate`] (four ASCII characters a token, any other character one).
    Estimate,
    /// The model's tokenizer, and its name.
    Exact(&'static tiktoken::CoreBpe, &'static str),
}

impl TokenCounter {
    /// The model's tokenizer when its name is known (`gpt-4o-mini`, `qwen2.5:14b`,
    /// `Qwen/Qwen2.5-7B-Instruct`, `llama-3.1-8b`, `deepseek-chat`, …), else an estimate.
    pub fn for_model(model: &str) -> Self {
        // Served names often carry an owner (`Qwen/Qwen2.5-…`) or a quantisation tag
        // (`qwen2.5:14b`); the tokenizer is named by the model family.
        let name = model.rsplit('/').next().unwrap_or(model);
        match tiktoken::model_to_encoding(name).and_then(|e| Some((tiktoken::get_encoding(e)?, e)))
        {
            Some((bpe, encoding)) => TokenCounter::Exact(bpe, encoding),
            None => TokenCounter::Estimate,
        }
    }

    /// How many tokens `text` takes for this model (exact or estimated).
    pub fn count(&self, text: &str) -> usize {
        match self {
            TokenCounter::Estimate => estimate(text),
            TokenCounter::Exact(bpe, _) => bpe.count(text),
        }
    }

    /// Whether counts are exact (prompts then need no safety margin for estimation error).
    pub fn is_exact(&self) -> bool {
        matches!(self, TokenCounter::Exact(..))
    }
}

impl fmt::Debug for TokenCounter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TokenCounter::Estimate => f.write_str("estimate"),
            TokenCounter::Exact(_, name) => f.write_str(name),
        }
    }
}

/// Tokens a text takes, estimated: about four characters a token for ASCII text, one a token
/// for other scripts (CJK text is close to a token a character).
pub fn estimate(text: &str) -> usize {
    let (ascii, other): (usize, usize) =
        text.chars().fold(
            (0, 0),
            |(a, o), c| if c.is_ascii() { (a + 1, o) } else { (a, o + 1) },
        );
    ascii.div_ceil(4) + other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_are_counted_by_their_own_tokenizer_and_others_estimated() {
        for (model, encoding) in [
            ("gpt-4o-mini", "o200k_base"),
            ("gpt-4", "cl100k_base"),
            ("qwen2.5-coder-1.5b-instruct", "qwen2"),
            ("qwen2.5:14b", "qwen2"),
            ("Qwen/Qwen2.5-7B-Instruct", "qwen2"),
            ("llama-3.1-8b-instruct", "llama3"),
        ] {
            let c = TokenCounter::for_model(model);
            assert_eq!(format!("{c:?}"), encoding, "{model}");
            assert!(c.is_exact());
        }
        let unknown = TokenCounter::for_model("my-own-model");
        assert!(!unknown.is_exact());
        assert_eq!(unknown.count("abcdefgh"), 2);
        // A real tokenizer counts what the estimate can only guess at.
        let qwen = TokenCounter::for_model("qwen2.5-coder-1.5b-instruct");
        assert_eq!(qwen.count("hello world"), 2);
        let text = "Write a haiku about autumn rain. ".repeat(50);
        let (exact, guess) = (qwen.count(&text), estimate(&text));
        assert!(exact > 0 && exact != guess, "{exact} vs {guess}");
    }

    #[test]
    fn cjk_text_is_estimated_a_token_a_character() {
        assert_eq!(estimate("秋雨"), 2);
        assert_eq!(estimate(""), 0);
    }
}
