//! Whether a host is this machine, for the rule that tokens never travel over plain http
//! to another one. Decided by the addresses the name resolves to (every one loopback),
//! never by its spelling: `foo.localhost` mapped elsewhere by a hosts file or a search
//! domain is another machine. A literal address needs no lookup. Each name is looked up
//! once per process (the client asks before every request).

use std::collections::HashMap;
use std::net::{IpAddr, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};

/// True when `host` (a name, an IPv4 address, or an IPv6 address without brackets) is
/// this machine: a loopback address, or a name whose every address is loopback. A name
/// that does not resolve is not this machine.
pub fn is_loopback(host: &str) -> bool {
    static KNOWN: OnceLock<Mutex<HashMap<String, bool>>> = OnceLock::new();
    if let Ok(ip) = host.parse::<IpAddr>() {
        return ip.is_loopback();
    }
    let known = KNOWN.get_or_init(Mutex::default);
    let lock = || known.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&answer) = lock().get(host) {
        return answer;
    }
    let answer = is_loopback_with(host, |name| {
        (name, 0)
            .to_socket_addrs()
            .map(|addrs| addrs.map(|a| a.ip()).collect())
    });
    lock().insert(host.to_owned(), answer);
    answer
}

/// [`is_loopback`] with the lookup given (tests map names to any addresses).
pub fn is_loopback_with(
    host: &str,
    resolve: impl FnOnce(&str) -> std::io::Result<Vec<IpAddr>>,
) -> bool {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return ip.is_loopback();
    }
    // RFC 6761: `.invalid` never resolves; no lookup leaves the machine for it.
    let lower = host.to_ascii_lowercase();
    if lower == "invalid" || lower.ends_with(".invalid") {
        return false;
    }
    match resolve(host) {
        Ok(addrs) => !addrs.is_empty() && addrs.iter().all(IpAddr::is_loopback),
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &str) -> std::io::Result<Vec<IpAddr>> {
        panic!("a literal address needs no lookup")
    }

    #[test]
    fn literal_addresses_need_no_lookup() {
        assert!(is_loopback_with("127.0.0.1", never));
        assert!(is_loopback_with("127.8.9.10", never));
        assert!(is_loopback_with("::1", never));
        assert!(!is_loopback_with("10.0.0.5", never));
        assert!(!is_loopback_with("::ffff:10.0.0.5", never));
        assert!(!is_loopback_with("qwenpaw.invalid", never));
        assert!(!is_loopback_with("INVALID", never));
    }

    #[test]
    fn names_are_judged_by_what_they_resolve_to() {
        let to = |ips: &'static [&'static str]| {
            move |_: &str| Ok(ips.iter().map(|ip| ip.parse().unwrap()).collect())
        };
        // Mapped elsewhere (a hosts file, a search domain): not this machine, whatever
        // the name says.
        assert!(!is_loopback_with("foo.localhost", to(&["10.0.0.5"])));
        assert!(!is_loopback_with(
            "localhost",
            to(&["127.0.0.1", "192.168.1.9"])
        ));
        assert!(!is_loopback_with("localhost", to(&[])));
        assert!(!is_loopback_with("foo.localhost", |_| Err(
            std::io::Error::other("NXDOMAIN")
        )));
        assert!(is_loopback_with("localhost", to(&["127.0.0.1", "::1"])));
        assert!(is_loopback_with("my-box", to(&["127.0.1.1"])));
    }
}
