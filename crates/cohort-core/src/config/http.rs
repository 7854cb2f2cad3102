//! `http:` in the team file: how `cohort serve` treats connections — how long a client may take
//! to send a request and may keep an idle connection open, how many connections it holds at
//! once, how many requests one connection carries, and which reverse proxies' forwarded-for
//! headers it believes, where `GET /metrics` is served for a scraper, and how many goals it takes (seed 000 §10.3). Each value out of its
//! range is a problem naming its field.

use super::agent::Findings;
use super::limits::bounded;
use super::raw::RawHttp;
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::time::Duration;

/// The HTTP server's connection settings (`http:` in the team file).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Http {
    /// How long a client has to send a whole request head (and its body) once it connected or
    /// began the next request (default 10 s).
    pub header_timeout: Duration,
    /// How long a keep-alive connection may sit between requests, or a response wait for a
    /// client that reads nothing, before it is closed (default 60 s).
    pub idle_timeout: Duration,
    /// Open connections at most, websockets included (default 1,024); lowered at start to
    /// what the process's open-file limit allows.
    pub max_connections: usize,
    /// Requests one connection carries before the server closes it (default 1,000).
    pub max_requests_per_connection: usize,
    /// Reverse proxies whose `X-Forwarded-For` / `Forwarded` headers name the client (none by
    /// default: a client's own forwarded headers are never believed).
    pub trusted_proxies: Vec<IpNet>,
    /// Where `GET /metrics` is also served, without a token, for a scraper on the operators'
    /// network (none by default: then only operators read it, on the API's address).
    pub metrics_bind: Option<SocketAddr>,
    /// A person's goal (a message in the base task) is refused with 429 while the team has
    /// this many tasks running (default 30, seed 000 §10.3).
    pub running_tasks: usize,
    /// Goals one person may give within [`Http::goal_window`] (default 5 in 15 s, seed 000
    /// §10.3); one more is refused with 429 and the seconds until the oldest leaves the window.
    pub goals_per_person: usize,
    /// The sliding window `goals_per_person` counts in (`goal_window_s`).
    pub goal_window: Duration,
}

impl Default for Http {
    fn default() -> Self {
        Http {
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_requests_per_connection: 1000,
            trusted_proxies: Vec::new(),
            metrics_bind: None,
            running_tasks: 30,
            goals_per_person: 5,
            goal_window: Duration::from_secs(15),
        }
    }
}

/// The longest `header_timeout_s` accepted: a request head that takes minutes is an attack.
const MAX_HEADER_TIMEOUT_S: u64 = 300;
/// The longest `idle_timeout_s` accepted (an hour).
const MAX_IDLE_TIMEOUT_S: u64 = 3600;
/// The longest `goal_window_s` accepted (a day).
const MAX_GOAL_WINDOW_S: u64 = 86_400;
/// Fewer connections than this could not hold a console and a login at once.
const MIN_CONNECTIONS: usize = 16;
const MAX_CONNECTIONS: usize = 1_000_000;

/// The `http:` block, checked.
pub(super) fn http(r: RawHttp, file: &Path, out: &mut Findings) -> Http {
    let d = Http::default();
    let secs = |out: &mut Findings, v: Option<u64>, field: &str, max: u64, default: Duration| {
        Duration::from_secs(bounded(
            out,
            file,
            &format!("http.{field}"),
            v,
            (1, Some(max)),
            default.as_secs(),
        ))
    };
    let header_timeout = secs(
        out,
        r.header_timeout_s,
        "header_timeout_s",
        MAX_HEADER_TIMEOUT_S,
        d.header_timeout,
    );
    let idle_timeout = secs(
        out,
        r.idle_timeout_s,
        "idle_timeout_s",
        MAX_IDLE_TIMEOUT_S,
        d.idle_timeout,
    );
    let max_connections = bounded(
        out,
        file,
        "http.max_connections",
        r.max_connections,
        (MIN_CONNECTIONS, Some(MAX_CONNECTIONS)),
        d.max_connections,
    );
    let max_requests_per_connection = bounded(
        out,
        file,
        "http.max_requests_per_connection",
        r.max_requests_per_connection,
        (1, None),
        d.max_requests_per_connection,
    );
    let trusted_proxies = proxies(&r.trusted_proxies, file, out);
    let metrics_bind = metrics_bind(r.metrics_bind.as_deref(), file, out);
    let mut count = |v: Option<usize>, field: &str, default: usize| {
        bounded(out, file, &format!("http.{field}"), v, (1, None), default)
    };
    let running_tasks = count(r.running_tasks, "running_tasks", d.running_tasks);
    let goals_per_person = count(r.goals_per_person, "goals_per_person", d.goals_per_person);
    let goal_window = secs(
        out,
        r.goal_window_s,
        "goal_window_s",
        MAX_GOAL_WINDOW_S,
        d.goal_window,
    );
    Http {
        header_timeout,
        idle_timeout,
        max_connections,
        max_requests_per_connection,
        trusted_proxies,
        metrics_bind,
        running_tasks,
        goals_per_person,
        goal_window,
    }
}

/// `http.trusted_proxies`, each an address or a network.
fn proxies(given: &[String], file: &Path, out: &mut Findings) -> Vec<IpNet> {
    let mut nets = Vec::new();
    for (i, p) in given.iter().enumerate() {
        match parse_proxy(p) {
            Ok(net) => nets.push(net),
            Err(why) => out.add(file, format!("http.trusted_proxies[{i}]"), why),
        }
    }
    nets
}

/// `http.metrics_bind`: an address and port, if given.
fn metrics_bind(
    given: Option<&str>,
    file: &Path,
    out: &mut Findings,
) -> Option<std::net::SocketAddr> {
    given.and_then(|a| match a.trim().parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            out.add(
                file,
                "http.metrics_bind",
                format!("`{a}` is not an address and port (e.g. `127.0.0.1:9464`)"),
            );
            None
        }
    })
}

/// An address (`10.0.0.5`, `::1`) or a network (`10.0.0.0/8`, `fd00::/8`). Host bits in a
/// network are dropped (`10.0.0.5/8` is `10.0.0.0/8`); an IPv6-mapped IPv4 address is taken
/// as the IPv4 one, the form peers are compared in.
pub fn parse_proxy(s: &str) -> Result<IpNet, String> {
    let s = s.trim();
    let net = if s.contains('/') {
        s.parse::<IpNet>().ok().map(|n| n.trunc())
    } else {
        s.parse::<IpAddr>()
            .ok()
            .map(|a| IpNet::from(a.to_canonical()))
    };
    net.ok_or_else(|| {
        format!(
            "`{s}` is neither an IP address nor a network (e.g. `10.0.0.5`, `10.0.0.0/8`, `fd00::/8`)"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::load_team;
    use crate::config::test_files::{tmp, write};

    const HEAD: &str = "llm: {provider: openai, model: m}\nagents:\n  - {id: m, role: manager, skills: [task_manager]}\n";

    #[test]
    fn http_settings_are_read_with_their_defaults() {
        let d = tmp("http");
        let t = load_team(&write(&d, "default.yaml", HEAD)).unwrap();
        assert_eq!(t.http, Http::default());
        let set = format!(
            "{HEAD}http: {{header_timeout_s: 3, idle_timeout_s: 20, max_connections: 64, max_requests_per_connection: 5, trusted_proxies: [10.0.0.5, 192.168.0.0/16, \"fd00::/8\"], metrics_bind: \"127.0.0.1:9464\"}}\n"
        );
        let t = load_team(&write(&d, "set.yaml", &set)).unwrap();
        assert_eq!(t.http.header_timeout, Duration::from_secs(3));
        assert_eq!(t.http.idle_timeout, Duration::from_secs(20));
        assert_eq!(t.http.max_connections, 64);
        assert_eq!(t.http.max_requests_per_connection, 5);
        let nets: Vec<String> = t
            .http
            .trusted_proxies
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(nets, ["10.0.0.5/32", "192.168.0.0/16", "fd00::/8"]);
        assert_eq!(t.http.metrics_bind, Some("127.0.0.1:9464".parse().unwrap()));
    }

    #[test]
    fn an_http_value_out_of_range_names_its_field() {
        let d = tmp("http-bad");
        let bad = format!(
            "{HEAD}http: {{header_timeout_s: 0, idle_timeout_s: 99999, max_connections: 2, max_requests_per_connection: 0, trusted_proxies: [10.0.0.1, proxy.local, 10.0.0.0/33], metrics_bind: \"localhost\"}}\n"
        );
        let problems = load_team(&write(&d, "bad.yaml", &bad))
            .unwrap_err()
            .problems();
        let fields: Vec<_> = problems.iter().map(|p| p.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "http.header_timeout_s",
                "http.idle_timeout_s",
                "http.max_connections",
                "http.max_requests_per_connection",
                "http.trusted_proxies[1]",
                "http.trusted_proxies[2]",
                "http.metrics_bind",
            ]
        );
        assert!(problems[4].message.contains("proxy.local"), "{problems:?}");
        let unknown = format!("{HEAD}http: {{header_timeout: 5}}\n");
        let p = &load_team(&write(&d, "unknown.yaml", &unknown))
            .unwrap_err()
            .problems()[0];
        assert_eq!(p.field, "http.header_timeout", "{p}");
    }

    #[test]
    fn a_proxy_is_an_address_or_a_network() {
        assert_eq!(
            parse_proxy(" 10.0.0.5/8 ").unwrap().to_string(),
            "10.0.0.0/8"
        );
        assert_eq!(parse_proxy("::1").unwrap().to_string(), "::1/128");
        assert_eq!(
            parse_proxy("::ffff:10.0.0.5").unwrap().to_string(),
            "10.0.0.5/32"
        );
        assert!(parse_proxy("").is_err());
        assert!(parse_proxy("10.0.0.300").is_err());
    }
}
