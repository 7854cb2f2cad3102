//! `mcp_servers/*.yaml`: one MCP server per file — its name, the description agents see, and
//! how to reach it: a child process (`command`/`args`/`env`), a server shipped inside the
//! `cohort` binary (`builtin`/`args`), or HTTP (`url`: streamable HTTP, or the older HTTP+SSE
//! transport, found out or named by `transport:`).

use crate::problem::Problem;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "an MCP server: a mapping with `name`, `description` and one of `command`, `builtin` or `url`"
)]
struct RawServer {
    name: String,
    description: String,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    builtin: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Variables of Cohort's own environment passed on to the server by name (its keys stay
    /// out of the file).
    #[serde(default)]
    pass_env: Vec<String>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    url: Option<String>,
    /// With `url`: which HTTP transport the server speaks (found out when not said).
    #[serde(default)]
    transport: Option<HttpFlavor>,
    /// With `url`: the server is reached with an OAuth access token.
    #[serde(default)]
    oauth: Option<OAuthSettings>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    connect_timeout_secs: Option<u64>,
    /// Results of its read-only tools kept this long for the same call (off when absent).
    #[serde(default)]
    cache_secs: Option<u64>,
    /// Risk levels that replace what the tools' annotations say: per tool name, `"*"` for
    /// the rest (`low`, `medium`, `high`).
    #[serde(default)]
    risk: crate::policy::RiskOverrides,
}

/// How to reach a server.
#[derive(Clone, Debug, PartialEq)]
pub enum McpTransport {
    /// A child process speaking MCP on stdio. It gets only `env` (never the parent's
    /// environment, so LLM keys cannot leak), and runs in `cwd`.
    Stdio {
        /// `command:`, the program to start.
        command: String,
        /// `args:`, its command-line arguments.
        args: Vec<String>,
        /// `env:`, the variables it is given; of the runtime's own environment it gets only `PATH`
        /// and `HOME`, and those `pass_env:` names.
        env: BTreeMap<String, String>,
        /// `pass_env:`, variables of Cohort's own environment it is given by name.
        pass_env: Vec<String>,
        /// The folder it runs in: `cwd:` resolved against the server file's folder, else that
        /// folder.
        cwd: PathBuf,
    },
    /// A server shipped inside the `cohort` binary (`cohort mcp serve NAME ARGS…`), run as a
    /// child process like `Stdio`.
    Builtin {
        /// `builtin:`, which server (one of [`BUILTIN_SERVERS`]).
        server: String,
        /// `args:`, passed to the server after its name.
        args: Vec<String>,
        /// `env:`, the variables it is given; of the runtime's own environment it gets only `PATH`
        /// and `HOME`, and those `pass_env:` names.
        env: BTreeMap<String, String>,
        /// `pass_env:`, variables of Cohort's own environment it is given by name.
        pass_env: Vec<String>,
        /// The folder it runs in: `cwd:` resolved against the server file's folder, else that
        /// folder.
        cwd: PathBuf,
    },
    /// Over HTTP.
    Http {
        /// `url:`, the server's `http://` or `https://` endpoint.
        url: String,
        /// `transport:`, which of MCP's HTTP transports it speaks.
        flavor: HttpFlavor,
        /// `oauth:`, how it is authorized (MCP's authorization spec); None: it is not.
        oauth: Option<OAuthSettings>,
    },
}

/// `oauth:` of a `url` server: it is reached with an OAuth access token, got once by a person
/// (`cohort mcp login`) and refreshed by the team, kept as a secret (never in states or logs).
/// Everything else (the authorization server, the scopes it wants) is found out from the
/// server, as MCP's authorization spec says; `oauth: {}` is enough for most servers.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[serde(
    expecting = "a mapping: `oauth: {}`, or with client_id, client_secret_env, scopes or client_metadata_url"
)]
pub struct OAuthSettings {
    /// `client_id:`, a client registered with the authorization server beforehand; without
    /// it the client names its metadata document (`client_metadata_url`) where the server
    /// takes one, else registers itself (dynamic client registration).
    #[serde(default)]
    pub client_id: Option<String>,
    /// `client_secret_env:`, the variable of Cohort's environment that holds that client's
    /// secret (a confidential client).
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// `scopes:`, the scopes to ask for; none: those the server's challenge or metadata name.
    #[serde(default)]
    pub scopes: Vec<String>,
    /// `client_metadata_url:`, the `https` address of this client's metadata document (a URL
    /// client id, SEP-991), used where the authorization server takes one.
    #[serde(default)]
    pub client_metadata_url: Option<String>,
}

/// Which of MCP's HTTP transports a `url` server speaks (`transport:` in its file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
#[serde(expecting = "`auto`, `streamable_http` or `sse`")]
pub enum HttpFlavor {
    /// Streamable HTTP first; a server that refuses it with a 4xx (MCP's way to tell an
    /// older server) is spoken to over SSE (the default).
    #[default]
    Auto,
    /// Streamable HTTP (MCP 2025-03-26 and later) only.
    StreamableHttp,
    /// The older HTTP+SSE transport (MCP 2024-11-05) only: `url` is its SSE endpoint.
    Sse,
}

/// One MCP server the team may use, read from its own file (named by the team file's
/// `mcp_servers:`, alone or in a folder) and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct McpServerConfig {
    /// `name:`, one word, unique in the team: what agents' `tools:` name the server by.
    pub name: String,
    /// `description:`, what the server offers; agents choose tools by it.
    pub description: String,
    /// How it is reached: `command`, `builtin` or `url`.
    pub transport: McpTransport,
    /// How long one call may take before it fails.
    pub call_timeout: Duration,
    /// How long starting the server and the MCP handshake may take (`npx`/`uvx` may first
    /// download the package, so the default is generous).
    pub connect_timeout: Duration,
    /// The file it came from, for error messages.
    pub file: PathBuf,
    /// `risk:` overrides of its tools' risk levels.
    pub risk: crate::policy::RiskOverrides,
    /// `cache_secs:`, how long a read-only tool's result serves the same call again (None:
    /// never).
    pub cache: Option<Duration>,
}

/// Names of the servers the `cohort` binary ships.
pub const BUILTIN_SERVERS: [&str; 3] = ["workspace", "notes", "web"];

/// Reads one server file; every problem is reported with the file and the field.
pub fn load_server(file: &Path) -> Result<McpServerConfig, Vec<Problem>> {
    let problem = |field: &str, message: String| Problem {
        file: file.to_path_buf(),
        field: field.into(),
        message,
    };
    let raw: RawServer = super::yaml::load(file)?;
    let mut problems = Vec::new();
    let name = raw.name.trim().to_owned();
    if name.is_empty() || name.chars().any(|c| c.is_whitespace()) {
        problems.push(problem(
            "name",
            format!("`{}` is not a usable server name (no spaces)", raw.name),
        ));
    }
    if raw.description.trim().is_empty() {
        problems.push(problem(
            "description",
            "agents choose tools by their description; it cannot be empty".into(),
        ));
    }
    // `Path::new("x.yaml").parent()` is `Some("")`: a bare file name lives in the current folder.
    let base = file
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let cwd = raw.cwd.as_ref().map(|c| base.join(c)).unwrap_or(base);
    let transport = transport(&raw, cwd, &problem, &mut problems);
    if raw.timeout_secs == Some(0) {
        problems.push(problem("timeout_secs", "must be at least 1".into()));
    }
    if raw.connect_timeout_secs == Some(0) {
        problems.push(problem("connect_timeout_secs", "must be at least 1".into()));
    }
    match transport {
        Some(transport) if problems.is_empty() => Ok(McpServerConfig {
            name,
            description: raw.description.trim().to_owned(),
            transport,
            call_timeout: Duration::from_secs(raw.timeout_secs.unwrap_or(60)),
            connect_timeout: Duration::from_secs(raw.connect_timeout_secs.unwrap_or(60)),
            file: file.to_path_buf(),
            risk: raw.risk,
            cache: raw.cache_secs.filter(|s| *s > 0).map(Duration::from_secs),
        }),
        _ => Err(problems),
    }
}

/// How the server is reached: exactly one of `command`, `builtin` (a server the binary ships)
/// or `url`; None, with a problem, if not one.
fn transport(
    raw: &RawServer,
    cwd: PathBuf,
    problem: &dyn Fn(&str, String) -> Problem,
    problems: &mut Vec<Problem>,
) -> Option<McpTransport> {
    if raw.oauth.is_some() && raw.url.is_none() {
        problems.push(problem(
            "oauth",
            "`oauth` authorizes a `url` server; a process gets its keys with `pass_env`".into(),
        ));
    }
    if raw.transport.is_some() && raw.url.is_none() {
        problems.push(problem(
            "transport",
            "`transport` says how to speak to a `url` server; a process speaks stdio".into(),
        ));
    }
    let kinds = [
        raw.command.is_some(),
        raw.builtin.is_some(),
        raw.url.is_some(),
    ]
    .iter()
    .filter(|k| **k)
    .count();
    if kinds != 1 {
        problems.push(problem(
            "(server)",
            "give exactly one of `command`, `builtin` or `url`".into(),
        ));
        None
    } else if let Some(command) = &raw.command {
        Some(McpTransport::Stdio {
            command: command.clone(),
            args: raw.args.clone(),
            env: raw.env.clone(),
            pass_env: raw.pass_env.clone(),
            cwd,
        })
    } else if let Some(server) = &raw.builtin {
        if !BUILTIN_SERVERS.contains(&server.as_str()) {
            problems.push(problem(
                "builtin",
                format!(
                    "no built-in server `{server}` (there are: {})",
                    BUILTIN_SERVERS.join(", ")
                ),
            ));
        }
        Some(McpTransport::Builtin {
            server: server.clone(),
            args: raw.args.clone(),
            env: raw.env.clone(),
            pass_env: raw.pass_env.clone(),
            cwd,
        })
    } else {
        let url = raw.url.clone().unwrap_or_default();
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            problems.push(problem("url", format!("`{url}` is not an http(s) URL")));
        }
        if !raw.args.is_empty() || !raw.env.is_empty() || !raw.pass_env.is_empty() {
            problems.push(problem(
                "args",
                "`args`, `env` and `pass_env` only apply to servers started as processes".into(),
            ));
        }
        let flavor = raw.transport.unwrap_or_default();
        if let Some(oauth) = &raw.oauth {
            check_oauth(oauth, flavor, problem, problems);
        }
        Some(McpTransport::Http {
            url,
            flavor,
            oauth: raw.oauth.clone(),
        })
    }
}

/// The problems of a `url` server's `oauth:` block.
fn check_oauth(
    oauth: &OAuthSettings,
    flavor: HttpFlavor,
    problem: &dyn Fn(&str, String) -> Problem,
    problems: &mut Vec<Problem>,
) {
    if flavor == HttpFlavor::Sse {
        problems.push(problem(
            "oauth",
            "OAuth is spoken over streamable HTTP; the older HTTP+SSE transport has none".into(),
        ));
    }
    if oauth.client_secret_env.is_some() && oauth.client_id.is_none() {
        problems.push(problem(
            "oauth.client_secret_env",
            "a client secret belongs to a registered client: give `client_id` too".into(),
        ));
    }
    if let Some(u) = &oauth.client_metadata_url
        && !u.starts_with("https://")
    {
        problems.push(problem(
            "oauth.client_metadata_url",
            format!("`{u}` is not an https URL (a URL client id must be https)"),
        ));
    }
}

/// Reads servers from files and folders (a folder means every `*.yaml`/`*.yml` in it). Server
/// names must be unique across them.
pub fn load_servers(paths: &[PathBuf]) -> Result<Vec<McpServerConfig>, Vec<Problem>> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for p in paths {
        if p.is_dir() {
            match std::fs::read_dir(p) {
                Ok(entries) => {
                    let mut found: Vec<PathBuf> = entries
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|f| f.extension().is_some_and(|x| x == "yaml" || x == "yml"))
                        .collect();
                    found.sort();
                    files.extend(found);
                }
                Err(e) => problems.push(Problem {
                    file: p.clone(),
                    field: "(folder)".into(),
                    message: format!("cannot read: {e}"),
                }),
            }
        } else {
            files.push(p.clone());
        }
    }
    let mut servers: Vec<McpServerConfig> = Vec::new();
    for f in files {
        match load_server(&f) {
            Ok(s) => {
                if let Some(first) = servers.iter().find(|o| o.name == s.name) {
                    problems.push(Problem {
                        file: f.clone(),
                        field: "name".into(),
                        message: format!(
                            "server name `{}` is also used by {}",
                            s.name,
                            first.file.display()
                        ),
                    });
                } else {
                    servers.push(s);
                }
            }
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(servers)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(tag: &str) -> crate::config::test_files::TestDir {
        crate::config::test_files::tmp(&format!("mcpcfg-{tag}"))
    }

    #[test]
    fn each_transport_reads_and_relative_paths_resolve_from_the_file() {
        let d = dir("ok");
        std::fs::write(
            d.join("a.yaml"),
            "name: files\ndescription: d\nbuiltin: workspace\nargs: [--root, ws]\n",
        )
        .unwrap();
        std::fs::write(
            d.join("b.yaml"),
            "name: time\ndescription: d\ncommand: uvx\nargs: [mcp-server-time]\nenv: {TZ: UTC}\n",
        )
        .unwrap();
        std::fs::write(
            d.join("c.yml"),
            "name: web\ndescription: d\nurl: http://127.0.0.1:1/mcp\ntimeout_secs: 5\ncache_secs: 30\n",
        )
        .unwrap();
        let s = load_servers(&[d.to_path_buf()]).unwrap();
        assert_eq!(s[0].connect_timeout, Duration::from_secs(60));
        assert_eq!(s.len(), 3);
        assert!(
            matches!(&s[0].transport, McpTransport::Builtin { cwd, .. } if cwd.as_path() == &*d)
        );
        assert!(matches!(&s[1].transport, McpTransport::Stdio { env, .. } if env["TZ"] == "UTC"));
        assert_eq!(s[2].call_timeout, Duration::from_secs(5));
        assert_eq!(s[2].cache, Some(Duration::from_secs(30)));
        assert_eq!(s[0].cache, None, "off unless set");
        let auto = HttpFlavor::Auto;
        assert!(matches!(&s[2].transport, McpTransport::Http { flavor, .. } if *flavor == auto));
    }

    #[test]
    fn a_url_servers_transport_is_read_and_refused_where_it_does_not_apply() {
        let d = dir("flavor");
        let f = d.join("sse.yaml");
        std::fs::write(
            &f,
            "name: old
description: d
url: http://h/sse
transport: sse
",
        )
        .unwrap();
        let s = load_server(&f).unwrap();
        assert!(
            matches!(&s.transport, McpTransport::Http { flavor, .. } if *flavor == HttpFlavor::Sse)
        );
        std::fs::write(
            &f,
            "name: old
description: d
url: http://h/sse
transport: ws
",
        )
        .unwrap();
        let p = load_server(&f).unwrap_err();
        assert!(p[0].message.contains("`sse`"), "{p:?}");
        std::fs::write(
            &f,
            "name: old
description: d
command: x
transport: sse
",
        )
        .unwrap();
        let p = load_server(&f).unwrap_err();
        assert_eq!(p[0].field, "transport", "{p:?}");
    }

    #[test]
    fn a_url_servers_oauth_is_read_and_its_slips_named() {
        let d = dir("oauth");
        let f = d.join("remote.yaml");
        let write = |oauth: &str| {
            std::fs::write(
                &f,
                format!("name: remote\ndescription: d\nurl: https://h/mcp\n{oauth}\n"),
            )
            .unwrap()
        };
        write("oauth: {}");
        let s = load_server(&f).unwrap();
        let McpTransport::Http { oauth, .. } = &s.transport else {
            panic!("{s:?}")
        };
        assert_eq!(oauth.as_ref(), Some(&OAuthSettings::default()));
        write("oauth: {client_id: c, client_secret_env: C_SECRET, scopes: [read]}");
        assert!(load_server(&f).is_ok());
        let slips = [
            ("oauth: {client_secret_env: S}", "oauth.client_secret_env"),
            (
                "oauth: {client_metadata_url: 'http://me/c.json'}",
                "oauth.client_metadata_url",
            ),
            ("transport: sse\noauth: {}", "oauth"),
            ("oauth: {client: x}", "oauth"),
        ];
        for (yaml, field) in slips {
            write(yaml);
            let p = load_server(&f).unwrap_err();
            assert!(
                p.iter().any(|p| p.field.starts_with(field)),
                "{yaml}: {p:?}"
            );
        }
        std::fs::write(&f, "name: p\ndescription: d\ncommand: x\noauth: {}\n").unwrap();
        let p = load_server(&f).unwrap_err();
        assert_eq!(p[0].field, "oauth", "{p:?}");
    }

    #[test]
    fn problems_name_file_and_field() {
        let d = dir("bad");
        let f = d.join("x.yaml");
        std::fs::write(&f, "name: a b\ndescription: ''\ncommand: x\nurl: ftp://x\n").unwrap();
        let p = load_server(&f).unwrap_err();
        let fields: Vec<_> = p.iter().map(|p| p.field.as_str()).collect();
        assert!(
            fields.contains(&"name")
                && fields.contains(&"description")
                && fields.contains(&"(server)"),
            "{fields:?}"
        );
        std::fs::write(&f, "name: a\ndescription: d\nbuiltin: x\ncolour: red\n").unwrap();
        let p = load_server(&f).unwrap_err();
        assert!(p[0].message.contains("colour"), "{:?}", p);
        std::fs::write(&f, "name: a\ndescription: d\nbuiltin: nope\n").unwrap();
        assert_eq!(load_server(&f).unwrap_err()[0].field, "builtin");
        std::fs::write(
            &f,
            "name: a\ndescription: d\nbuiltin: workspace\nrisk: {read_file: extreme}\n",
        )
        .unwrap();
        let p = load_server(&f).unwrap_err();
        assert!(
            p[0].field.starts_with("risk") && p[0].message.contains("extreme"),
            "{p:?}"
        );
    }

    #[test]
    fn risk_levels_override_the_tools_annotations() {
        let d = dir("risk");
        let f = d.join("r.yaml");
        std::fs::write(
            &f,
            "name: a\ndescription: d\nbuiltin: workspace\nrisk: {write_file: medium, \"*\": low}\n",
        )
        .unwrap();
        let s = load_server(&f).unwrap();
        assert_eq!(s.risk["write_file"], crate::policy::Risk::Medium);
        assert_eq!(s.risk["*"], crate::policy::Risk::Low);
    }

    #[test]
    fn duplicate_names_are_refused() {
        let d = dir("dup");
        std::fs::write(
            d.join("a.yaml"),
            "name: s\ndescription: d\nurl: http://x/mcp\n",
        )
        .unwrap();
        std::fs::write(
            d.join("b.yaml"),
            "name: s\ndescription: d\nurl: http://y/mcp\n",
        )
        .unwrap();
        let p = load_servers(&[d.to_path_buf()]).unwrap_err();
        assert!(p[0].message.contains("also used by"));
    }

    #[test]
    fn a_bare_file_name_resolves_from_the_current_folder() {
        let d = dir("bare");
        std::fs::write(
            d.join("w.yaml"),
            "name: w\ndescription: d\nbuiltin: workspace\nargs: [--root, ws]\n",
        )
        .unwrap();
        let prev = std::env::current_dir().unwrap();
        std::env::set_current_dir(&*d).unwrap();
        let s = load_server(Path::new("w.yaml"));
        std::env::set_current_dir(prev).unwrap();
        match s.unwrap().transport {
            McpTransport::Builtin { cwd, .. } => assert_eq!(cwd, PathBuf::from(".")),
            other => panic!("{other:?}"),
        }
    }
}
