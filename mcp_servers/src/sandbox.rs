//! Confines every path an agent names to one root folder: a lexical check first (no absolute
//! paths, no drive letters or backslashes, no NUL, no `..` above the root, bounded length), then
//! the filesystem check (canonicalize the deepest existing ancestor and require it to stay under
//! the canonical root, so a symlink cannot lead outside).
//!
//! The resolved path is the *canonical* one, so callers never touch a path that still contains a
//! symlink in its existing part; the parts that do not exist yet are plain names created fresh.
//! (A race with another process swapping a folder for a symlink between check and use is out of
//! scope: the agents reach the root only through these tools, which cannot create symlinks.)

use std::io;
use std::path::{Path, PathBuf};

/// Longest accepted path, in bytes. Far below `PATH_MAX`, so an agent's path never fails
/// half-way in the OS with a confusing error.
pub const MAX_PATH_BYTES: usize = 1024;
/// Longest accepted path component (the usual `NAME_MAX`).
pub const MAX_COMPONENT_BYTES: usize = 255;

/// Why a path was refused. The messages are shown to agents, so they say what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the path is empty: name a file relative to the workspace root")]
    Empty,
    #[error("the path names the workspace root itself, not a file inside it")]
    IsRoot,
    #[error("the path contains a NUL byte")]
    Nul,
    #[error(
        "the path is too long ({len} bytes; at most {MAX_PATH_BYTES}, {MAX_COMPONENT_BYTES} per name)"
    )]
    TooLong { len: usize },
    #[error("`{0}` is absolute: paths are relative to the workspace root (e.g. `notes/todo.md`)")]
    Absolute(String),
    #[error("`{0}` uses a Windows-style path (drive letter or backslash): use `/` between names")]
    WindowsStyle(String),
    #[error("`{0}` leads outside the workspace root")]
    Escapes(String),
    #[error("`{0}` goes through a symlink that points outside the workspace root")]
    SymlinkOutside(String),
    #[error("`{0}` goes through a symlink whose target does not exist")]
    DanglingSymlink(String),
    #[error("`{path}`: {source}")]
    Io { path: String, source: io::Error },
}

/// One root folder and the rules for reaching inside it.
#[derive(Clone, Debug)]
pub struct Sandbox {
    /// Canonical (absolute, symlink-free), so prefix checks compare like with like.
    root: PathBuf,
}

impl Sandbox {
    /// Opens `root`, creating it if missing (a fresh team starts with an empty workspace).
    pub fn open(root: &Path) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let root = std::fs::canonicalize(root)?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                "not a directory",
            ));
        }
        Ok(Self { root })
    }

    /// The canonical root folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolves `path` (relative to the root; empty or `.` is the root) to a real path inside the
    /// root. The path need not exist; its existing part must resolve inside the root.
    pub fn resolve(&self, path: &str) -> Result<PathBuf, SandboxError> {
        let parts = normalize(path)?;
        let io_err = |source| SandboxError::Io {
            path: path.to_owned(),
            source,
        };
        // Walk forward to the deepest entry that exists. `symlink_metadata` sees a symlink as
        // existing even when its target is missing, so a dangling link is caught below instead
        // of being mistaken for a fresh name that a write would then follow outside.
        let mut existing = self.root.clone();
        let mut taken = 0;
        for part in &parts {
            let next = existing.join(part);
            match std::fs::symlink_metadata(&next) {
                Ok(_) => {
                    existing = next;
                    taken += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                Err(e) => return Err(io_err(e)),
            }
        }
        let canonical = match std::fs::canonicalize(&existing) {
            Ok(c) => c,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(SandboxError::DanglingSymlink(path.to_owned()));
            }
            Err(e) => return Err(io_err(e)),
        };
        if !canonical.starts_with(&self.root) {
            return Err(SandboxError::SymlinkOutside(path.to_owned()));
        }
        let mut real = canonical;
        real.extend(&parts[taken..]);
        Ok(real)
    }

    /// Like [`resolve`](Self::resolve), for a file about to be written: the path must name
    /// something below the root, not the root itself.
    pub fn resolve_for_write(&self, path: &str) -> Result<PathBuf, SandboxError> {
        if path.is_empty() {
            return Err(SandboxError::Empty);
        }
        let real = self.resolve(path)?;
        if real == self.root {
            return Err(SandboxError::IsRoot);
        }
        Ok(real)
    }

    /// `real` relative to the root with `/` separators (`""` for the root), for messages and
    /// URIs; `None` if it is not under the root.
    pub fn relative(&self, real: &Path) -> Option<String> {
        let rel = real.strip_prefix(&self.root).ok()?;
        let names: Option<Vec<&str>> = rel.iter().map(|c| c.to_str()).collect();
        Some(names?.join("/"))
    }
}

/// The lexical half: checks `path` and returns its names with `.` dropped and `..` applied.
/// `..` may climb back out of a folder it entered, never above the root. Applying `..`
/// lexically (rather than letting the OS follow it after a symlink) is stricter, never looser:
/// the result is then checked against the filesystem anyway.
pub fn normalize(path: &str) -> Result<Vec<String>, SandboxError> {
    if path.contains('\0') {
        return Err(SandboxError::Nul);
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(SandboxError::TooLong { len: path.len() });
    }
    let shown = || path.to_owned();
    if path.starts_with('/') {
        return Err(SandboxError::Absolute(shown()));
    }
    let bytes = path.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    // A backslash is a separator on Windows and a legal name byte elsewhere; refusing it keeps
    // `a\..\..\x` from meaning different things on different hosts.
    if drive || path.contains('\\') {
        return Err(SandboxError::WindowsStyle(shown()));
    }
    let mut parts: Vec<String> = Vec::new();
    for name in path.split('/') {
        match name {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(SandboxError::Escapes(shown()));
                }
            }
            _ if name.len() > MAX_COMPONENT_BYTES => {
                return Err(SandboxError::TooLong { len: name.len() });
            }
            _ => parts.push(name.to_owned()),
        }
    }
    Ok(parts)
}

/// Folders for this crate's unit tests (here, in `workspace_fs` and in `notes_store`).
#[cfg(test)]
pub(crate) mod test_dir {
    use std::path::{Path, PathBuf};

    /// An empty folder for one test in the temp folder (`tag` names it; the process id keeps
    /// runs apart), removed with everything in it when the test drops it, so repeated runs
    /// leave nothing in the temp folder.
    pub(crate) struct TestDir(PathBuf);

    impl TestDir {
        pub(crate) fn new(tag: &str) -> TestDir {
            let d = std::env::temp_dir().join(format!("cohort-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&d);
            std::fs::create_dir_all(&d).unwrap();
            TestDir(d)
        }
    }

    impl std::ops::Deref for TestDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_dir::TestDir;
    use super::*;

    #[test]
    fn lexical_rules_refuse_escapes_and_foreign_forms() {
        assert!(matches!(normalize("../x"), Err(SandboxError::Escapes(_))));
        assert!(matches!(
            normalize("a/../../x"),
            Err(SandboxError::Escapes(_))
        ));
        assert!(matches!(normalize("./../"), Err(SandboxError::Escapes(_))));
        assert!(matches!(
            normalize("/etc/passwd"),
            Err(SandboxError::Absolute(_))
        ));
        assert!(matches!(
            normalize("C:/Windows"),
            Err(SandboxError::WindowsStyle(_))
        ));
        assert!(matches!(
            normalize("a\\..\\..\\x"),
            Err(SandboxError::WindowsStyle(_))
        ));
        assert!(matches!(
            normalize("\\\\server\\share"),
            Err(SandboxError::WindowsStyle(_))
        ));
        assert!(matches!(normalize("a\0b"), Err(SandboxError::Nul)));
        assert!(matches!(
            normalize(&"a/".repeat(600)),
            Err(SandboxError::TooLong { .. })
        ));
        assert!(matches!(
            normalize(&"n".repeat(300)),
            Err(SandboxError::TooLong { .. })
        ));
    }

    #[test]
    fn lexical_rules_keep_inside_paths() {
        assert_eq!(normalize("a/./b//c").unwrap(), ["a", "b", "c"]);
        assert_eq!(normalize("a/b/../c").unwrap(), ["a", "c"]);
        assert!(normalize("").unwrap().is_empty());
        assert!(normalize("a/..").unwrap().is_empty());
        assert_eq!(normalize("...").unwrap(), ["..."]);
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_followed_only_while_they_stay_inside() {
        use std::os::unix::fs::symlink;
        let base = TestDir::new("sandbox-links");
        let root = base.join("root");
        let outside = base.join("outside");
        std::fs::create_dir_all(root.join("dir")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        std::fs::write(outside.join("secret"), "s").unwrap();
        symlink(outside.join("secret"), root.join("file_out")).unwrap();
        symlink(&outside, root.join("dir_out")).unwrap();
        symlink(root.join("dir"), root.join("dir_in")).unwrap();
        symlink(base.join("missing"), root.join("dangling")).unwrap();
        let sb = Sandbox::open(&root).unwrap();

        for p in [
            "file_out",
            "dir_out",
            "dir_out/secret",
            "dir_out/new/deeper",
        ] {
            assert!(
                matches!(sb.resolve(p), Err(SandboxError::SymlinkOutside(_))),
                "{p}"
            );
        }
        assert!(matches!(
            sb.resolve_for_write("dangling"),
            Err(SandboxError::DanglingSymlink(_))
        ));
        let inside = sb.resolve("dir_in/new.txt").unwrap();
        assert_eq!(inside, sb.root().join("dir/new.txt"));
        assert_eq!(sb.relative(&inside).as_deref(), Some("dir/new.txt"));
        // A sibling folder whose name merely starts like the root is not inside it.
        assert_eq!(sb.relative(&base.join("rootx/a")), None);
        assert!(matches!(
            sb.resolve_for_write("."),
            Err(SandboxError::IsRoot)
        ));
        assert!(matches!(sb.resolve_for_write(""), Err(SandboxError::Empty)));
    }
}
