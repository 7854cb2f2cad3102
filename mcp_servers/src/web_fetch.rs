//! What the `web` server may fetch, and fetching it within limits: which hosts (an allowlist,
//! a denylist, and no loopback, private or link-local address unless allowed by name, so an
//! agent cannot reach the machine's own services), how many bytes and how long, and a page as
//! text a model can read (an HTML page without its markup, scripts and styles).

use std::net::IpAddr;
use std::time::Duration;

/// Which hosts may be reached.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostRules {
    /// When not empty, only these hosts (and their subdomains).
    pub allow: Vec<String>,
    /// Never these hosts (and their subdomains).
    pub deny: Vec<String>,
}

/// `rule` names `host` or a domain above it.
fn covers(rule: &str, host: &str) -> bool {
    let (rule, host) = (rule.trim_end_matches('.'), host.trim_end_matches('.'));
    host.eq_ignore_ascii_case(rule)
        || host
            .to_ascii_lowercase()
            .ends_with(&format!(".{}", rule.to_ascii_lowercase()))
}

/// An address of this machine or of a private network.
fn internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                // 100.64.0.0/10, carrier-grade NAT: not the public internet either.
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6
                    .to_ipv4_mapped()
                    .is_some_and(|v4| internal(IpAddr::V4(v4)))
        }
    }
}

impl HostRules {
    /// Whether `url`'s host is denied.
    pub fn denies(&self, url: &reqwest::Url) -> bool {
        let host = url.host_str().unwrap_or_default();
        self.deny.iter().any(|r| covers(r, host))
    }

    /// Whether `url` may be fetched as written (before its host is looked up): http(s) only,
    /// its host not denied, allowed when there is an allowlist, and not an internal address
    /// or `localhost` unless allowed by name.
    pub fn check(&self, url: &reqwest::Url) -> Result<(), String> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "only http and https addresses are fetched, not `{}`",
                url.scheme()
            ));
        }
        let host = url
            .host_str()
            .ok_or_else(|| format!("`{url}` names no host"))?
            .trim_start_matches('[')
            .trim_end_matches(']');
        if let Some(rule) = self.deny.iter().find(|r| covers(r, host)) {
            return Err(format!("host `{host}` is denied (`{rule}`)"));
        }
        let allowed = self.allow.iter().any(|r| covers(r, host));
        if !self.allow.is_empty() && !allowed {
            return Err(format!(
                "host `{host}` is not among the allowed ones ({})",
                self.allow.join(", ")
            ));
        }
        let inside =
            host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(internal);
        if inside && !allowed {
            return Err(format!(
                "`{host}` is this machine or a private network: allow it by name to fetch it"
            ));
        }
        Ok(())
    }

    /// [`check`](Self::check), then the host's addresses looked up: a name that leads to an
    /// internal address is refused unless it is allowed by name.
    pub async fn check_resolved(&self, url: &reqwest::Url) -> Result<(), String> {
        self.check(url)?;
        let host = url.host_str().unwrap_or_default();
        if self.allow.iter().any(|r| covers(r, host)) || host.parse::<IpAddr>().is_ok() {
            return Ok(());
        }
        let port = url.port_or_known_default().unwrap_or(80);
        let addrs = tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("`{host}` could not be looked up: {e}"))?;
        for addr in addrs {
            if internal(addr.ip()) {
                return Err(format!(
                    "`{host}` leads to {} (this machine or a private network): allow it by name to fetch it",
                    addr.ip()
                ));
            }
        }
        Ok(())
    }
}

/// What one fetch got.
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched {
    /// Where it came from in the end (after redirects).
    pub url: String,
    pub status: u16,
    pub content_type: String,
    /// The page's title, when it is an HTML page with one.
    pub title: Option<String>,
    /// The content as text (an HTML page without its markup).
    pub text: String,
    /// The body was longer than the byte limit and was cut there.
    pub cut: bool,
}

/// Limits of one fetch.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_bytes: usize,
    pub timeout: Duration,
}

/// A client that follows at most five redirects, each to a host the rules allow as written
/// (a redirect to an internal address given by name is caught by the next fetch's lookup
/// only: see `docs/tools.md`).
pub fn client(rules: &HostRules, limits: Limits) -> reqwest::Client {
    let rules = rules.clone();
    let policy = reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= 5 {
            attempt.error("more than five redirects")
        } else if let Err(why) = rules.check(attempt.url()) {
            attempt.error(format!("a redirect went where it may not: {why}"))
        } else {
            attempt.follow()
        }
    });
    reqwest::Client::builder()
        .redirect(policy)
        .timeout(limits.timeout)
        .user_agent(concat!("cohort-web/", env!("CARGO_PKG_VERSION")))
        .build()
        .unwrap_or_default()
}

/// Fetches `url` within `limits`, its body cut at `limits.max_bytes`.
pub async fn fetch(
    client: &reqwest::Client,
    rules: &HostRules,
    url: &str,
    limits: Limits,
) -> Result<Fetched, String> {
    let url = reqwest::Url::parse(url).map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    rules.check_resolved(&url).await?;
    let mut response = client
        .get(url.clone())
        .send()
        .await
        .map_err(|e| format!("fetching {url} failed: {}", with_causes(&e)))?;
    let status = response.status().as_u16();
    let final_url = response.url().to_string();
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let mut body = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("reading {final_url} failed: {e}"))?
    {
        let room = limits.max_bytes.saturating_sub(body.len());
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let (title, text) = readable(&content_type, &body);
    Ok(Fetched {
        url: final_url,
        status,
        content_type,
        title,
        text,
        cut,
    })
}

/// An error and what caused it, as one line (reqwest says why a redirect was refused only in
/// its error's source).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(&format!(": {c}"));
        cause = c.source();
    }
    text
}

/// The body as text a model can read: an HTML page without its markup (and its title), text
/// and JSON as they are, anything else described rather than shown.
fn readable(content_type: &str, body: &[u8]) -> (Option<String>, String) {
    let kind = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let text = String::from_utf8_lossy(body);
    let sniffed_html = kind.is_empty() && text.trim_start().starts_with('<');
    if kind == "text/html" || kind == "application/xhtml+xml" || sniffed_html {
        return (title_of(&text), html_to_text(&text));
    }
    let textual = kind.starts_with("text/")
        || kind.ends_with("json")
        || kind.ends_with("xml")
        || kind.is_empty();
    if textual {
        (None, text.into_owned())
    } else {
        let what = format!(
            "({} bytes of `{kind}`, which is not text: not shown)",
            body.len()
        );
        (None, what)
    }
}

/// The text of a page's `<title>`.
fn title_of(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let start = lower.find("<title")?;
    let open_end = start + lower[start..].find('>')? + 1;
    let end = open_end + lower[open_end..].find("</title")?;
    let title = squeeze(&decode_entities(&html[open_end..end]));
    (!title.is_empty()).then_some(title)
}

/// An HTML page's text: scripts, styles and comments dropped, block ends as line breaks,
/// entities decoded, runs of blank space shortened.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let rest = &lower[i..];
        if rest.starts_with("<!--") {
            i += rest.find("-->").map_or(rest.len(), |e| e + 3);
            continue;
        }
        if rest.starts_with('<') {
            let end = rest.find('>').map_or(rest.len(), |e| e + 1);
            let tag = tag_name(&rest[1..end]);
            if matches!(
                tag.as_str(),
                "script" | "style" | "noscript" | "template" | "svg"
            ) {
                let close = format!("</{tag}");
                i += rest.find(&close).map_or(rest.len(), |c| {
                    c + rest[c..].find('>').map_or(rest.len() - c, |e| e + 1)
                });
                continue;
            }
            let name = tag.trim_start_matches('/');
            if BLOCKS.contains(&name) {
                out.push('\n');
            } else if SPACED.contains(&name) {
                out.push(' ');
            }
            i += end;
            continue;
        }
        let next = rest.find('<').map_or(html.len(), |n| i + n);
        out.push_str(&decode_entities(&html[i..next]));
        i = next;
    }
    out.lines()
        .map(squeeze)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Tags whose start or end breaks a line.
const BLOCKS: &[&str] = &[
    "p",
    "br",
    "div",
    "li",
    "ul",
    "ol",
    "tr",
    "table",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "section",
    "article",
    "header",
    "footer",
    "blockquote",
    "pre",
    "hr",
    "title",
    "main",
    "nav",
];

/// Tags that stand apart from the text beside them (a cell, an image); any other inline tag
/// (`b`, `a`, `span`) is part of its words.
const SPACED: &[&str] = &[
    "td", "th", "dt", "dd", "img", "input", "button", "label", "option",
];

/// The name of the tag whose text (after `<`) is `inner`, lower-cased, `/` kept for an end.
fn tag_name(inner: &str) -> String {
    inner
        .trim_end_matches('>')
        .split(|c: char| c.is_whitespace() || c == '>')
        .next()
        .unwrap_or("")
        .trim_end_matches('/')
        .to_owned()
}

/// One line's runs of blank space as single spaces, trimmed.
fn squeeze(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The common named entities and every numeric one.
fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let end = rest.find(';').filter(|e| *e <= 10);
        let decoded = end.and_then(|e| entity(&rest[1..e]));
        match (end, decoded) {
            (Some(e), Some(c)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        _ => {
            let code = match name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => name.strip_prefix('#')?.parse().ok()?,
            };
            return char::from_u32(code);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> reqwest::Url {
        reqwest::Url::parse(s).unwrap()
    }

    #[test]
    fn hosts_are_allowed_denied_and_internal_addresses_kept_out_unless_named() {
        let open = HostRules::default();
        assert!(open.check(&url("https://example.com/a")).is_ok());
        assert!(open.check(&url("ftp://example.com/a")).is_err());
        for inside in [
            "http://127.0.0.1:8080/",
            "http://localhost/",
            "http://10.1.2.3/",
            "http://192.168.0.1/",
            "http://169.254.169.254/latest/meta-data",
            "http://[::1]/",
            "http://[fd00::1]/",
            "http://100.64.0.1/",
        ] {
            assert!(open.check(&url(inside)).is_err(), "{inside}");
        }
        let named = HostRules {
            allow: vec!["127.0.0.1".into()],
            deny: vec![],
        };
        assert!(named.check(&url("http://127.0.0.1:9/x")).is_ok());
        assert!(
            named.check(&url("https://example.com/")).is_err(),
            "not allowed"
        );
        let deny = HostRules {
            allow: vec![],
            deny: vec!["evil.com".into()],
        };
        assert!(
            deny.check(&url("https://www.evil.com/")).is_err(),
            "a subdomain"
        );
        assert!(deny.check(&url("https://notevil.com/")).is_ok());
    }

    #[test]
    fn a_page_reads_as_its_text_without_scripts_styles_or_markup() {
        let html = r#"<html><head><title>The &amp; Page</title><style>p{color:red}</style>
            <script>alert("<p>no</p>")</script></head><body><!-- note -->
            <h1>Heading</h1><p>One &lt;two&gt; three&#33;</p><ul><li>a</li><li>b&nbsp;c</li></ul>
            <p>Tom&#x27;s   <b>bold</b>, <a href="x">linked</a></p><table><tr><td>1</td><td>2</td></tr></table></body></html>"#;
        assert_eq!(title_of(html).as_deref(), Some("The & Page"));
        let text = html_to_text(html);
        assert_eq!(
            text,
            "The & Page\nHeading\nOne <two> three!\na\nb c\nTom's bold, linked\n1 2"
        );
        let (title, json) = readable("application/json", br#"{"a": 1}"#);
        assert_eq!((title, json.as_str()), (None, r#"{"a": 1}"#));
        let (_, png) = readable("image/png", &[0u8; 10]);
        assert!(png.contains("not text"), "{png}");
        assert_eq!(decode_entities("a & b &bogus; c"), "a & b &bogus; c");
    }
}
