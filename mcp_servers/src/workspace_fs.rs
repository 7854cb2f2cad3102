//! The workspace server's file operations, plain blocking functions over a [`Sandbox`] (no MCP
//! here, so they are tested directly): read, write, append, list, regex search, and the file
//! list behind `resources/list`. Outputs are bounded so one call cannot flood an agent's context.

use crate::sandbox::{Sandbox, SandboxError};
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// Largest file `read_file` (and the search) will read.
pub const MAX_READ_BYTES: u64 = 1 << 20;
/// Most entries one listing returns.
pub const MAX_LIST_ENTRIES: usize = 1000;
/// Most matches one search returns.
pub const MAX_MATCHES: usize = 200;
/// A matching line is cut to this many characters.
const MAX_LINE_CHARS: usize = 240;
/// Folders skipped by recursive walks: version-control internals are noise to an agent.
const SKIPPED_DIRS: [&str; 1] = [".git"];

/// Why an operation failed; shown to the agent as the tool's error.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    #[error(transparent)]
    Refused(#[from] SandboxError),
    #[error("`{0}` does not exist (list_dir shows what does)")]
    NotFound(String),
    #[error("`{0}` is a directory, not a file")]
    IsDir(String),
    #[error("`{0}` is not a directory")]
    NotDir(String),
    #[error("`{path}` is {what}, not a regular file: it is neither read nor written")]
    NotFile { path: String, what: &'static str },
    #[error("`{path}` is too large to read ({size} bytes; at most {MAX_READ_BYTES})")]
    TooLarge { path: String, size: u64 },
    #[error("`{0}` is not UTF-8 text")]
    NotText(String),
    #[error("the search pattern is empty")]
    EmptyPattern,
    #[error("`{pattern}` is not a valid regular expression: {reason}")]
    BadPattern { pattern: String, reason: String },
    #[error("`{path}`: {source}")]
    Io { path: String, source: io::Error },
}

/// What a listed entry is.
#[derive(Clone, Debug, PartialEq)]
pub enum EntryKind {
    File {
        size: u64,
    },
    Dir,
    /// Not followed by listings (it may point anywhere, or loop); the path rules still decide
    /// whether a read or write through it is allowed.
    Symlink,
    /// A FIFO, socket or device: listed, never read or written (it could block a call).
    Special {
        what: &'static str,
    },
}

/// One listed entry, its path relative to the root.
#[derive(Clone, Debug, PartialEq)]
pub struct Entry {
    pub path: String,
    pub kind: EntryKind,
}

/// One line that contains the search pattern.
#[derive(Clone, Debug, PartialEq)]
pub struct Match {
    pub path: String,
    pub line: usize,
    pub text: String,
}

/// A bounded result: `truncated` says the bound was hit.
#[derive(Clone, Debug, PartialEq)]
pub struct Bounded<T> {
    pub items: Vec<T>,
    pub truncated: bool,
}

/// Files inside one root folder.
#[derive(Clone, Debug)]
pub struct Workspace {
    sandbox: Sandbox,
}

impl Workspace {
    pub fn open(root: &Path) -> io::Result<Self> {
        Ok(Self {
            sandbox: Sandbox::open(root)?,
        })
    }

    pub fn root(&self) -> &Path {
        self.sandbox.root()
    }

    /// `path` as the agent should name it from now on: normalized, relative to the root.
    fn shown(&self, real: &Path, fallback: &str) -> String {
        self.sandbox
            .relative(real)
            .unwrap_or_else(|| fallback.to_owned())
    }

    pub fn read(&self, path: &str) -> Result<String, FsError> {
        let real = self.sandbox.resolve(path)?;
        read_text(&real, &self.shown(&real, path))
    }

    /// Writes `content`, replacing the file; creates missing parent folders. Returns the
    /// normalized path.
    pub fn write(&self, path: &str, content: impl AsRef<[u8]>) -> Result<String, FsError> {
        let (real, shown) = self.prepare_write(path)?;
        let mut opts = fs::OpenOptions::new();
        opts.write(true).create(true).truncate(true);
        open_regular(&real, &shown, &opts)?
            .write_all(content.as_ref())
            .map_err(|source| io_err(&shown, source))?;
        Ok(shown)
    }

    /// Appends `content`, creating the file (and parent folders) if missing.
    pub fn append(&self, path: &str, content: &str) -> Result<String, FsError> {
        let (real, shown) = self.prepare_write(path)?;
        let mut opts = fs::OpenOptions::new();
        opts.create(true).append(true);
        open_regular(&real, &shown, &opts)?
            .write_all(content.as_bytes())
            .map_err(|source| io_err(&shown, source))?;
        Ok(shown)
    }

    fn prepare_write(&self, path: &str) -> Result<(PathBuf, String), FsError> {
        let real = self.sandbox.resolve_for_write(path)?;
        let shown = self.shown(&real, path);
        if real.is_dir() {
            return Err(FsError::IsDir(shown));
        }
        // The parent is the canonical existing folder plus fresh names, all inside the root.
        if let Some(parent) = real.parent() {
            fs::create_dir_all(parent).map_err(|source| io_err(&shown, source))?;
        }
        Ok((real, shown))
    }

    /// The entries of folder `path` (the root if empty), sorted; all levels if `recursive`.
    pub fn list(&self, path: &str, recursive: bool) -> Result<Bounded<Entry>, FsError> {
        let real = self.sandbox.resolve(path)?;
        let shown = self.shown(&real, path);
        match fs::metadata(&real) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(FsError::NotFound(shown)),
            Err(source) => return Err(io_err(&shown, source)),
            Ok(m) if !m.is_dir() => return Err(FsError::NotDir(shown)),
            Ok(_) => {}
        }
        self.walk(&real, recursive, MAX_LIST_ENTRIES)
    }

    /// Every regular file under the root (not through symlinks), for `resources/list`.
    pub fn files(&self) -> Result<Bounded<Entry>, FsError> {
        let mut all = self.walk(self.sandbox.root(), true, usize::MAX)?;
        all.items
            .retain(|e| matches!(e.kind, EntryKind::File { .. }));
        all.truncated = all.items.len() > MAX_LIST_ENTRIES;
        all.items.truncate(MAX_LIST_ENTRIES);
        Ok(all)
    }

    /// Lines matching the regular expression `pattern` (Rust `regex` syntax; a plain word is
    /// a literal) in the file or folder `path` (the whole root if empty). Files that are too
    /// large or not text are skipped. The regex engine runs in linear time, so a hostile
    /// pattern cannot hang the server; its compiled size is bounded too.
    pub fn search(&self, pattern: &str, path: &str) -> Result<Bounded<Match>, FsError> {
        if pattern.is_empty() {
            return Err(FsError::EmptyPattern);
        }
        let re = regex::RegexBuilder::new(pattern)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| FsError::BadPattern {
                pattern: pattern.to_owned(),
                reason: e.to_string(),
            })?;
        let real = self.sandbox.resolve(path)?;
        let shown = self.shown(&real, path);
        let files = match fs::metadata(&real) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(FsError::NotFound(shown)),
            Err(source) => return Err(io_err(&shown, source)),
            Ok(m) if m.is_dir() => self.walk(&real, true, usize::MAX)?.items,
            Ok(m) => vec![Entry {
                path: shown,
                kind: EntryKind::File { size: m.len() },
            }],
        };
        let mut found = Bounded {
            items: Vec::new(),
            truncated: false,
        };
        for entry in files {
            if !matches!(entry.kind, EntryKind::File { .. }) {
                continue;
            }
            let Ok(text) = read_text(&self.sandbox.root().join(&entry.path), &entry.path) else {
                continue;
            };
            for (i, line) in text.lines().enumerate() {
                if !re.is_match(line) {
                    continue;
                }
                if found.items.len() == MAX_MATCHES {
                    found.truncated = true;
                    return Ok(found);
                }
                found.items.push(Match {
                    path: entry.path.clone(),
                    line: i + 1,
                    text: line.chars().take(MAX_LINE_CHARS).collect(),
                });
            }
        }
        Ok(found)
    }

    /// Depth-first, sorted, without following symlinks (so no cycles and no way out).
    fn walk(&self, dir: &Path, recursive: bool, limit: usize) -> Result<Bounded<Entry>, FsError> {
        let mut out = Bounded {
            items: Vec::new(),
            truncated: false,
        };
        let mut stack = vec![dir.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let shown = self.shown(&dir, "");
            let mut entries: Vec<_> = fs::read_dir(&dir)
                .map_err(|source| io_err(&shown, source))?
                .filter_map(Result::ok)
                .collect();
            entries.sort_by_key(|e| e.file_name());
            let mut subdirs = Vec::new();
            for e in entries {
                let Ok(kind) = e.file_type() else { continue };
                let real = e.path();
                // Names that are not UTF-8 cannot be named back by an agent; leave them out.
                let Some(path) = self.sandbox.relative(&real) else {
                    continue;
                };
                let kind = if kind.is_symlink() {
                    EntryKind::Symlink
                } else if kind.is_dir() {
                    if recursive && !SKIPPED_DIRS.iter().any(|s| e.file_name() == *s) {
                        subdirs.push(real);
                    }
                    EntryKind::Dir
                } else if kind.is_file() {
                    EntryKind::File {
                        size: e.metadata().map(|m| m.len()).unwrap_or(0),
                    }
                } else {
                    EntryKind::Special {
                        what: special_kind(&kind),
                    }
                };
                if out.items.len() == limit {
                    out.truncated = true;
                    return Ok(out);
                }
                out.items.push(Entry { path, kind });
            }
            // Reversed so the stack pops them in name order.
            stack.extend(subdirs.into_iter().rev());
        }
        Ok(out)
    }
}

fn io_err(path: &str, source: io::Error) -> FsError {
    FsError::Io {
        path: path.to_owned(),
        source,
    }
}

fn read_text(real: &Path, shown: &str) -> Result<String, FsError> {
    let file = open_regular(real, shown, fs::OpenOptions::new().read(true))?;
    let size = file
        .metadata()
        .map_err(|source| io_err(shown, source))?
        .len();
    if size > MAX_READ_BYTES {
        return Err(FsError::TooLarge {
            path: shown.to_owned(),
            size,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    // Bounded again while reading: the file may grow after it was measured.
    file.take(MAX_READ_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| io_err(shown, source))?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(FsError::TooLarge {
            path: shown.to_owned(),
            size: bytes.len() as u64,
        });
    }
    String::from_utf8(bytes).map_err(|_| FsError::NotText(shown.to_owned()))
}

/// Opens `real` (a canonical path: no symlink left in it) as a regular file, without ever
/// blocking: a FIFO opened for writing waits for a reader, and reading one waits for a writer,
/// until the tool call times out. So the entry is looked at first (`lstat`, which cannot
/// block: a socket or FIFO is refused before it is opened), then opened non-blocking and
/// without following a symlink, and looked at again through the open file (`fstat`): an entry
/// swapped for a FIFO between the look and the open is caught there, and what was checked is
/// what is used.
fn open_regular(real: &Path, shown: &str, opts: &fs::OpenOptions) -> Result<fs::File, FsError> {
    match fs::symlink_metadata(real) {
        Ok(m) => check_regular(&m, shown)?,
        // A write creates it; a read's open below says it is missing.
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(source) => return Err(io_err(shown, source)),
    }
    let mut opts = opts.clone();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    let file = opts.open(real).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => FsError::NotFound(shown.to_owned()),
        _ => io_err(shown, e),
    })?;
    let meta = file.metadata().map_err(|source| io_err(shown, source))?;
    check_regular(&meta, shown)?;
    Ok(file)
}

fn check_regular(meta: &fs::Metadata, shown: &str) -> Result<(), FsError> {
    if meta.is_dir() {
        return Err(FsError::IsDir(shown.to_owned()));
    }
    if !meta.is_file() {
        return Err(FsError::NotFile {
            path: shown.to_owned(),
            what: special_kind(&meta.file_type()),
        });
    }
    Ok(())
}

/// What an entry that is neither a file, a folder nor a symlink is, for messages.
fn special_kind(kind: &fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if kind.is_symlink() {
        return "a symlink";
    }
    "a special file"
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::test_dir::TestDir;

    /// A workspace on `root` in a fresh folder; the folder goes when the test drops its guard.
    fn workspace(tag: &str) -> (TestDir, Workspace) {
        let d = TestDir::new(&format!("wsfs-{tag}"));
        let ws = Workspace::open(&d.join("root")).unwrap();
        (d, ws)
    }

    #[test]
    fn write_creates_parents_and_append_extends() {
        let (_d, ws) = workspace("write");
        assert_eq!(ws.write("a/b/../c.txt", "one\n").unwrap(), "a/c.txt");
        ws.append("a/c.txt", "two\n").unwrap();
        ws.append("new.log", "x").unwrap();
        assert_eq!(ws.read("./a//c.txt").unwrap(), "one\ntwo\n");
        assert_eq!(ws.read("new.log").unwrap(), "x");
        assert!(matches!(ws.write("a", "x"), Err(FsError::IsDir(_))));
        assert!(matches!(ws.read("missing"), Err(FsError::NotFound(_))));
        assert!(matches!(ws.read("a"), Err(FsError::IsDir(_))));
    }

    #[test]
    fn listing_is_sorted_bounded_and_skips_git() {
        let (_d, ws) = workspace("list");
        for p in ["b.txt", "a/x.txt", "a/y/z.txt", ".git/HEAD"] {
            ws.write(p, "hello").unwrap();
        }
        let flat: Vec<_> = ws.list("", false).unwrap().items;
        let names: Vec<_> = flat.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, [".git", "a", "b.txt"]);
        let deep: Vec<_> = ws.list(".", true).unwrap().items;
        let names: Vec<_> = deep.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(names, [".git", "a", "b.txt", "a/x.txt", "a/y", "a/y/z.txt"]);
        assert!(matches!(ws.list("b.txt", false), Err(FsError::NotDir(_))));
        let files: Vec<_> = ws.files().unwrap().items;
        assert_eq!(files.len(), 3, "{files:?}");
    }

    #[test]
    fn search_finds_matching_lines_and_skips_non_text() {
        let (d, ws) = workspace("search");
        ws.write("src/a.rs", "fn main() {}\nlet x = a.*b;\n")
            .unwrap();
        ws.write("notes.md", "main idea\n").unwrap();
        fs::write(d.join("root/bin.dat"), [0xff, 0xfe, b'm', b'a', b'i', b'n']).unwrap();
        let hits = ws.search("main", "").unwrap().items;
        let shown: Vec<_> = hits
            .iter()
            .map(|m| format!("{}:{}", m.path, m.line))
            .collect();
        assert_eq!(shown, ["notes.md:1", "src/a.rs:1"]);
        // A regular expression: `^fn` only matches at a line start, `a\.\*b` only itself.
        let starts: Vec<_> = ws
            .search("^fn ", "")
            .unwrap()
            .items
            .iter()
            .map(|m| m.line)
            .collect();
        assert_eq!(starts, [1]);
        assert_eq!(ws.search(r"a\.\*b", "src").unwrap().items[0].line, 2);
        assert!(ws.search(r"a\.\*b", "notes.md").unwrap().items.is_empty());
        assert!(matches!(
            ws.search("(unclosed", ""),
            Err(FsError::BadPattern { .. })
        ));
        assert!(matches!(ws.search("", ""), Err(FsError::EmptyPattern)));
    }

    #[test]
    fn search_stops_at_the_match_bound() {
        let (_d, ws) = workspace("bound");
        ws.write("many.txt", "hit\n".repeat(MAX_MATCHES + 5))
            .unwrap();
        let found = ws.search("hit", "").unwrap();
        assert_eq!(found.items.len(), MAX_MATCHES);
        assert!(found.truncated);
    }

    /// Makes a FIFO at `path`.
    #[cfg(unix)]
    fn mkfifo(path: &Path) {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a NUL-terminated path that outlives the call.
        assert_eq!(
            unsafe { libc::mkfifo(c.as_ptr(), 0o600) },
            0,
            "mkfifo {path:?}"
        );
    }

    /// Runs `f` on a thread of its own; its answer, or None if it has not answered within ten
    /// seconds (it blocks: the test fails rather than hangs).
    #[cfg(unix)]
    fn within_10_s<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(f()));
        rx.recv_timeout(std::time::Duration::from_secs(10)).ok()
    }

    #[cfg(unix)]
    #[test]
    fn a_fifo_or_a_socket_is_refused_at_once_never_opened_to_block() {
        let (d, ws) = workspace("special");
        mkfifo(&d.join("root/pipe"));
        let _socket = std::os::unix::net::UnixListener::bind(d.join("root/sock")).unwrap();
        for (path, what) in [("pipe", "FIFO"), ("sock", "socket")] {
            let ws = ws.clone();
            let answers = within_10_s(move || {
                (
                    ws.write(path, "x").map(|_| ()),
                    ws.append(path, "x").map(|_| ()),
                    ws.read(path).map(|_| ()),
                )
            })
            .unwrap_or_else(|| panic!("a call on the {what} blocked"));
            for answer in [answers.0, answers.1, answers.2] {
                match answer {
                    Err(e @ FsError::NotFile { .. }) => {
                        assert!(e.to_string().contains(what), "{e}")
                    }
                    other => panic!("{path}: {other:?}"),
                }
            }
        }
        // Listed for what they are; searched past; no resource.
        ws.write("note.txt", "pipe dream").unwrap();
        let listed = ws.list("", false).unwrap().items;
        assert!(
            listed.iter().any(|e| e.path == "pipe"
                && e.kind
                    == EntryKind::Special {
                        what: "a FIFO (named pipe)"
                    }),
            "{listed:?}"
        );
        let ws2 = ws.clone();
        let hits = within_10_s(move || ws2.search("pipe", "").unwrap().items).unwrap();
        assert_eq!(hits.len(), 1, "{hits:?}");
        assert_eq!(ws.files().unwrap().items.len(), 1);
    }

    #[test]
    fn large_files_are_refused() {
        let (_d, ws) = workspace("large");
        ws.write("big", "x".repeat(MAX_READ_BYTES as usize + 1))
            .unwrap();
        assert!(matches!(ws.read("big"), Err(FsError::TooLarge { .. })));
    }
}
