//! How the command line writes to a person: errors with each cause once, and colour only on a
//! terminal that wants it (`NO_COLOR` unset, stderr a tty).

use std::io::IsTerminal as _;

/// An error and its causes, each said once: a cause that the message before it ends with (a
/// `thiserror` message that quotes its source) is not repeated.
pub fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if out.ends_with(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// Prints `error: …` on stderr.
pub fn print_error(e: &anyhow::Error) {
    eprintln!("error: {}", describe(e));
}

/// Whether stderr gets ANSI colours: a terminal, and no `NO_COLOR` (https://no-color.org).
pub fn colour() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}

/// Paints text with an SGR code when colours are on.
pub struct Paint(pub bool);

impl Paint {
    fn sgr(&self, code: &str, text: &str) -> String {
        if self.0 {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
    pub fn green(&self, t: &str) -> String {
        self.sgr("32", t)
    }
    pub fn red(&self, t: &str) -> String {
        self.sgr("31", t)
    }
    pub fn yellow(&self, t: &str) -> String {
        self.sgr("33", t)
    }
    pub fn bold(&self, t: &str) -> String {
        self.sgr("1", t)
    }
    pub fn dim(&self, t: &str) -> String {
        self.sgr("2", t)
    }
}

/// `1 agent`, `2 agents`.
pub fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("API key variable OPENAI_API_KEY not set: {0}")]
    struct Quoting(#[source] std::env::VarError);

    #[test]
    fn a_cause_the_message_already_quotes_is_said_once() {
        let e =
            anyhow::Error::new(Quoting(std::env::VarError::NotPresent)).context("loading t.yaml");
        assert_eq!(
            describe(&e),
            "loading t.yaml: API key variable OPENAI_API_KEY not set: environment variable not found"
        );
    }

    #[test]
    fn counts_read_at_a_glance() {
        assert_eq!(count(1, "problem"), "1 problem");
        assert_eq!(count(2, "problem"), "2 problems");
    }
}
