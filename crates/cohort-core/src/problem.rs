//! `Problem`: one thing wrong in a file a user wrote (team config, script, prompts), named by
//! file and field so it can be fixed without guessing.

use std::fmt;
use std::path::PathBuf;

/// Which file, which field (a path such as `agents[1].skills[2]` or `headings.role`; `(file)`
/// for the whole file; `line N` for a syntax error), and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    /// The file the user wrote that holds the problem.
    pub file: PathBuf,
    /// Where in the file: a field path, `(file)`, or `line N`.
    pub field: String,
    /// What is wrong, for the user to read.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {}: {}",
            self.file.display(),
            self.field,
            self.message
        )
    }
}
