//! Who a request comes from, for login throttling and logs: the TCP peer, unless the peer is
//! one of the team's trusted reverse proxies (`http.trusted_proxies`); then the right-most
//! address in `X-Forwarded-For` (else `Forwarded`) that is not itself a trusted proxy. A
//! client's own forwarded headers are never believed: only a trusted proxy's are read, and
//! only the hops it and the proxies before it appended.

use super::ApiState;
use axum::extract::FromRequestParts;
use axum::extract::connect_info::ConnectInfo;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderName, header};
use ipnet::IpNet;
use std::net::{IpAddr, SocketAddr};

/// The reverse proxies whose forwarded-for headers are believed.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    pub fn new(nets: Vec<IpNet>) -> Self {
        TrustedProxies(nets)
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|n| n.contains(&ip))
    }

    /// The client behind `peer`: `peer` itself unless it is a trusted proxy; then walking the
    /// forwarded chain from its right end (the hop the proxy saw), the first address that is
    /// not a trusted proxy. A hop that cannot be read (`unknown`, an obfuscated name, junk)
    /// ends the walk at the last trusted hop: nothing left of it can be believed.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        let mut client = peer;
        for hop in forwarded_chain(headers).into_iter().rev() {
            let Some(ip) = hop else { break };
            client = ip;
            if !self.trusts(ip) {
                break;
            }
        }
        client
    }
}

/// The hops of `X-Forwarded-For` (all its lines, in order) or, without one, of `Forwarded`'s
/// `for=` parameters; each hop an address or None when it names none.
fn forwarded_chain(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let lines = |name: &HeaderName| -> Vec<String> {
        headers
            .get_all(name)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect()
    };
    let xff = lines(&HeaderName::from_static("x-forwarded-for"));
    if !xff.is_empty() {
        return xff
            .iter()
            .flat_map(|l| l.split(','))
            .map(|hop| parse_hop(hop.trim()))
            .collect();
    }
    lines(&header::FORWARDED)
        .iter()
        .flat_map(|l| l.split(','))
        .map(|element| {
            element
                .split(';')
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("for"))
                .and_then(|(_, v)| parse_hop(v.trim().trim_matches('"')))
        })
        .collect()
}

/// `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]` or `[2001:db8::1]:4711`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let ip = hop
        .parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| {
            hop.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .and_then(|h| h.parse().ok())
        })?;
    Some(ip.to_canonical())
}

/// Where a request comes from: the client (see [`TrustedProxies::client`]) and the TCP peer.
/// Both None under tests that call the router without connect info; then failed logins are
/// counted per human id only.
pub struct ClientAddr {
    pub client: Option<IpAddr>,
    pub peer: Option<IpAddr>,
}

impl FromRequestParts<ApiState> for ClientAddr {
    type Rejection = std::convert::Infallible;
    async fn from_request_parts(
        parts: &mut Parts,
        state: &ApiState,
    ) -> Result<Self, Self::Rejection> {
        let peer = ConnectInfo::<SocketAddr>::from_request_parts(parts, state)
            .await
            .ok()
            .map(|c| c.0.ip());
        let client = peer.map(|p| state.inner.proxies.client(p, &parts.headers));
        Ok(ClientAddr { client, peer })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn proxies(nets: &[&str]) -> TrustedProxies {
        TrustedProxies::new(
            nets.iter()
                .map(|n| cohort_core::config::parse_proxy(n).unwrap())
                .collect(),
        )
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        let p = proxies(&["10.0.0.1"]);
        let h = headers(&[("x-forwarded-for", "1.2.3.4"), ("forwarded", "for=1.2.3.4")]);
        assert_eq!(p.client(ip("203.0.113.9"), &h), ip("203.0.113.9"));
        assert_eq!(
            TrustedProxies::default().client(ip("10.0.0.1"), &h),
            ip("10.0.0.1"),
            "no proxy is trusted by default"
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_right_most_untrusted_hop_is_the_client() {
        let p = proxies(&["10.0.0.0/8", "::1"]);
        // The client put a spoofed address in front; the proxies appended what they saw.
        let h = headers(&[
            ("x-forwarded-for", "6.6.6.6, 198.51.100.7"),
            ("x-forwarded-for", "10.1.2.3"),
        ]);
        assert_eq!(p.client(ip("10.0.0.1"), &h), ip("198.51.100.7"));
        assert_eq!(p.client(ip("::1"), &h), ip("198.51.100.7"));
        // The peer in its IPv6-mapped form is the same IPv4 proxy.
        assert_eq!(p.client(ip("::ffff:10.0.0.1"), &h), ip("198.51.100.7"));
        // Without a forwarded header the proxy itself is all we know.
        assert_eq!(p.client(ip("10.0.0.1"), &HeaderMap::new()), ip("10.0.0.1"));
        // Every hop trusted: the left-most one.
        let inner = headers(&[("x-forwarded-for", "10.9.9.9, 10.1.1.1")]);
        assert_eq!(p.client(ip("10.0.0.1"), &inner), ip("10.9.9.9"));
        // A hop that names no address stops the walk at the last trusted one.
        let junk = headers(&[("x-forwarded-for", "198.51.100.7, unknown, 10.1.1.1")]);
        assert_eq!(p.client(ip("10.0.0.1"), &junk), ip("10.1.1.1"));
    }

    #[test]
    fn forwarded_is_read_when_there_is_no_x_forwarded_for() {
        let p = proxies(&["10.0.0.1"]);
        let h = headers(&[(
            "forwarded",
            r#"for=6.6.6.6, for="[2001:db8:cafe::17]:4711";proto=https;by=10.0.0.1"#,
        )]);
        assert_eq!(p.client(ip("10.0.0.1"), &h), ip("2001:db8:cafe::17"));
        let v4 = headers(&[("forwarded", "For=198.51.100.7:5000")]);
        assert_eq!(p.client(ip("10.0.0.1"), &v4), ip("198.51.100.7"));
        let hidden = headers(&[("forwarded", "for=_hidden")]);
        assert_eq!(p.client(ip("10.0.0.1"), &hidden), ip("10.0.0.1"));
    }

    #[test]
    fn hops_are_read_with_or_without_ports_and_brackets() {
        assert_eq!(parse_hop("192.0.2.1"), Some(ip("192.0.2.1")));
        assert_eq!(parse_hop("192.0.2.1:80"), Some(ip("192.0.2.1")));
        assert_eq!(parse_hop("[2001:db8::1]"), Some(ip("2001:db8::1")));
        assert_eq!(parse_hop("[2001:db8::1]:80"), Some(ip("2001:db8::1")));
        assert_eq!(parse_hop("unknown"), None);
        assert_eq!(parse_hop(""), None);
    }
}
