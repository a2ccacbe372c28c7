//! One validator per kind of input, shared by everything that lets a value in: the
//! command line and the environment (`settings`), the job file (`state::store`) and the
//! seed plugin's file (`plugin`). Each returns why a value is refused, in words that never
//! echo more than a short, escaped preview of it (a 100 KB session id or a password in a
//! URL must not reach the terminal); the caller prefixes where the value came from.
//!
//! Task ids have their own home, `ids` (`parse_task_id` for one given,
//! `stored_task_id` for one in a file).

use std::time::Duration;

use crate::time::Timestamp;

/// Longest label accepted: session, user, channel, agent, target agent, group, fork
/// branch. QwenPaw's own ids are far shorter (an IM conversation id is under 100).
pub const MAX_LABEL: usize = 256;

/// Longest job id accepted (atc makes 12 hex digits; the plugin's were uuids).
pub const MAX_JOB_ID: usize = 64;

/// The longest duration any flag takes: ten years. Longer ones cannot mean anything to a
/// tick, and bounding them keeps every deadline computed from them far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// Timestamps from 1970 up to (not including) 2200-01-01T00:00:00Z.
pub const MAX_TIMESTAMP_SECS: u64 = 7_258_118_400;

/// The short, escaped preview every refusal shows of a value (`text::preview`).
pub use crate::text::preview;

/// A label (session, user, channel, agent, group, branch): kept exactly as given
/// (QwenPaw matches them byte for byte) but not blank, at most [`MAX_LABEL`] characters,
/// and free of control characters (they would reach a terminal or a log line).
pub fn label(value: &str) -> Result<(), String> {
    if value.trim().is_empty() {
        return Err("must not be empty".to_owned());
    }
    let n = value.chars().count();
    if n > MAX_LABEL {
        return Err(format!(
            "is {n} characters long; at most {MAX_LABEL} are accepted"
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(format!("{} contains a control character", preview(value)));
    }
    Ok(())
}

/// A new group's name, a [`label`] besides: no `]`, which would end the name in its
/// turn's `[ATC_GROUP: …]` line early (an agent or a script reading the marker to its
/// first `]` would take `a]b` for `a`). Names already in a job file are not held to it.
pub fn group(value: &str) -> Result<(), String> {
    if value.contains(']') {
        return Err(format!(
            "{} contains ']', which would end the name in its message's [ATC_GROUP: …] line early; pick a name without it",
            preview(value)
        ));
    }
    Ok(())
}

/// A job id as stored: `^[A-Za-z0-9_-]{1,64}$`.
pub fn job_id(value: &str) -> Result<(), String> {
    if value.is_empty() || value.len() > MAX_JOB_ID {
        return Err(format!(
            "{} is not 1 to {MAX_JOB_ID} characters long",
            preview(value)
        ));
    }
    if !value
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(format!(
            "{} may hold only letters, digits, '-' and '_'",
            preview(value)
        ));
    }
    Ok(())
}

/// A QwenPaw base URL, normalised: trimmed, trailing `/` stripped, `/api` appended
/// unless present. Refuses what cannot be a plain QwenPaw address: other schemes,
/// credentials (they would end up in the job file; never echoed), a port outside
/// 1–65535, queries, fragments, whitespace and control characters.
pub fn base_url(raw: &str) -> Result<String, String> {
    // Checked before anything echoes the value: `user:pw@` must never be printed.
    if raw.contains('@') {
        return Err(
            "base URL contains a user name or password ('@'); remove it (tokens go in QWENPAW_RUNTIME_INTERNAL_TOKEN or ATC_BEARER_TOKEN, never in the URL or the job file)".to_owned(),
        );
    }
    // Built only for a refusal: a sound URL (every job, every load) costs no copy.
    let shown = || preview(raw);
    let url = raw.trim().trim_end_matches('/');
    if url.len() > 2048 {
        return Err(format!("base URL {} is too long", shown()));
    }
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(format!(
            "base URL {} has no scheme; write it like http://127.0.0.1:8088",
            shown()
        ));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(format!(
            "base URL {} uses {}://; only http:// and https:// are supported",
            shown(),
            preview(&scheme).trim_matches('"')
        ));
    }
    if rest.contains(['?', '#']) || rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "base URL {} contains a query, fragment, whitespace or control character; give only scheme, host, port and path",
            shown()
        ));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    let (host, port) =
        split_authority(authority).ok_or_else(|| format!("base URL {} has no host", shown()))?;
    if host.is_empty() {
        return Err(format!("base URL {} has no host", shown()));
    }
    let bracketed = authority.starts_with('[');
    let host_ok = if bracketed {
        host.parse::<std::net::Ipv6Addr>().is_ok()
    } else {
        host.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
    };
    if !host_ok {
        return Err(format!(
            "base URL {} has a host that is not a name or an address",
            shown()
        ));
    }
    let path = &rest[authority.len()..];
    let bytes = path.as_bytes();
    let path_ok = bytes.iter().enumerate().all(|(i, &b)| match b {
        b'%' => {
            bytes.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
                && bytes.get(i + 2).is_some_and(u8::is_ascii_hexdigit)
        }
        _ => b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:/".contains(&b),
    });
    if !path_ok {
        return Err(format!(
            "base URL {} has characters a URL path cannot hold; give only scheme, host, port and path",
            shown()
        ));
    }
    if let Some(port) = port {
        match port.parse::<u32>() {
            Ok(1..=65535) if !port.starts_with('+') => {}
            _ => {
                return Err(format!(
                    "base URL {} has port {}, which is not a port (1 to 65535)",
                    shown(),
                    preview(port).trim_matches('"')
                ));
            }
        }
    }
    let url = format!("{scheme}://{rest}");
    Ok(if url.ends_with("/api") {
        url
    } else {
        format!("{url}/api")
    })
}

/// `host[:port]` or `[v6][:port]` → (host, port). `None` for a bracket left open.
fn split_authority(authority: &str) -> Option<(&str, Option<&str>)> {
    if let Some(v6) = authority.strip_prefix('[') {
        let (host, after) = v6.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':').unwrap_or(after)))),
        };
    }
    Some(match authority.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    })
}

/// A base URL whose path is not QwenPaw's API root: QwenPaw serves its API at `/api`
/// (`http://host:8088/api`), so `/api/api` or `/prefix/api` reach nothing. `None` when
/// the path is plain `/api`. (A reverse proxy may mount QwenPaw under a prefix: `watch`
/// accepts such a path only when the server answers there as QwenPaw.)
pub fn api_path_problem(normalized: &str) -> Option<String> {
    let rest = normalized.split_once("://").map_or(normalized, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    (path != "/api").then(|| {
        let root = &normalized[..normalized.len() - path.len()];
        format!(
            "{} is not QwenPaw's API: QwenPaw serves it at /api (write {root}, or {root}/api)",
            preview(normalized)
        )
    })
}

/// A timestamp in a sane range (1970 to 2199).
pub fn timestamp(t: Timestamp) -> Result<(), String> {
    if t > Timestamp::from_unix(MAX_TIMESTAMP_SECS - 1) {
        return Err(format!("{t} is after the year 2199"));
    }
    Ok(())
}

/// A duration small enough that every deadline computed from it stays far from overflow.
pub fn duration(d: Duration) -> Result<Duration, String> {
    if d > MAX_DURATION {
        return Err("longer than 3650d (ten years), the most atc takes".to_owned());
    }
    Ok(d)
}

/// A duration as people write it (humantime: `30s`, `5m`, `24h`, `7d`), at most ten years:
/// the flags, their environment variables and the config file all take it through here.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|err| format!("{err} (write durations like 30s, 5m, 24h, 7d)"))
        .and_then(duration)
}

/// A timeout (`--http-timeout`, `--turn-timeout`): a duration, and not zero (a zero
/// timeout fails every request at once).
pub fn parse_timeout(text: &str) -> Result<Duration, String> {
    parse_duration(text).and_then(|d| {
        if d.is_zero() {
            Err("0s is no timeout: every request would fail at once (give one like 30s)".to_owned())
        } else {
            Ok(d)
        }
    })
}

/// `tick --concurrency`: polls and deliveries in flight at once.
pub const CONCURRENCY: std::ops::RangeInclusive<u32> = 1..=256;
/// `tick --max-strikes`: failed checks in a row before a job is abandoned.
pub const STRIKES: std::ops::RangeInclusive<u32> = 1..=u32::MAX;
/// `tick --follow-up-depth`: levels a follow-up goes up a delegation tree (0: none).
pub const FOLLOW_UP_DEPTH: std::ops::RangeInclusive<u32> = 0..=16;

/// A whole number in `range`, written in decimal.
pub fn count(text: &str, range: &std::ops::RangeInclusive<u32>) -> Result<u32, String> {
    let n: u32 = text
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a whole number", preview(text)))?;
    if !range.contains(&n) {
        return Err(if *range.end() == u32::MAX {
            format!("{n} is less than {}", range.start())
        } else {
            format!("{n} is not from {} to {}", range.start(), range.end())
        });
    }
    Ok(n)
}

/// A yes or no: `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`, in any case.
pub fn boolean(text: &str) -> Result<bool, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(format!(
            "{} is neither true nor false (write true or false, 1 or 0)",
            preview(text)
        )),
    }
}

/// A token from the environment: printable ASCII, no spaces or control characters (a
/// trailing `\r` from a CRLF env file would otherwise make every request fail as if the
/// server were down). The error never shows the token.
pub fn token(value: &str) -> Result<(), String> {
    if let Some((i, c)) = value
        .chars()
        .enumerate()
        .find(|(_, c)| !c.is_ascii_graphic())
    {
        let what = match c {
            '\r' => "a carriage return (\\r: a CRLF line ending?)".to_owned(),
            '\n' => "a line feed (\\n)".to_owned(),
            ' ' => "a space".to_owned(),
            c if c.is_control() => format!("a control character ({})", c.escape_debug()),
            _ => "a character that is not printable ASCII".to_owned(),
        };
        return Err(format!(
            "contains {what} at position {}; a token is printable ASCII only: fix the value (the token itself is not shown)",
            i + 1
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_capped_and_free_of_control_characters() {
        assert!(label("console:default").is_ok());
        assert!(label("s-ü 1").is_ok());
        assert!(label(&"a".repeat(MAX_LABEL)).is_ok());
        let long = "a".repeat(100 * 1024);
        let err = label(&long).unwrap_err();
        assert!(err.len() < 100, "{err}");
        for bad in ["", "  ", "s\n", "s\x1b[31m", "s\r"] {
            assert!(label(bad).is_err(), "{bad:?}");
        }
        let err = label(&format!("{}\n", "x".repeat(5000))).unwrap_err();
        assert!(err.len() < 200, "{err}");
    }

    #[test]
    fn base_urls_have_a_port_in_range_and_no_credentials() {
        for (raw, want) in [
            ("http://127.0.0.1:8088", "http://127.0.0.1:8088/api"),
            ("http://127.0.0.1:1/", "http://127.0.0.1:1/api"),
            ("http://h:65535/api", "http://h:65535/api"),
            ("https://h", "https://h/api"),
            ("http://[::1]:8088", "http://[::1]:8088/api"),
            ("http://[::1]", "http://[::1]/api"),
            ("http://h:1/zz%41", "http://h:1/zz%41/api"),
        ] {
            assert_eq!(base_url(raw).unwrap(), want, "{raw}");
        }
        // At most 2,048 characters (what is left after a trailing '/').
        let longest = format!("http://h/{}", "a".repeat(2048 - "http://h/".len()));
        assert_eq!(base_url(&longest).unwrap(), format!("{longest}/api"));
        let err = base_url(&format!("{longest}a")).unwrap_err();
        assert!(err.ends_with(" is too long"), "{err}");
        for raw in [
            "http://127.0.0.1:99999",
            "http://127.0.0.1:65536",
            "http://127.0.0.1:0",
            "http://h:",
            "http://h:-1",
            "http://h:+80",
            "http://h:8x",
            "http://[::1]:0",
            "http://[::1",
            "http://:80",
            // A '%' not followed by two hex digits.
            "http://h/zz%4z",
            "http://h/zz%z4",
            "http://h/zz%4",
        ] {
            assert!(base_url(raw).is_err(), "{raw}");
        }
        // Each refused with its reason: a query, a fragment, whitespace or a control
        // character, each alone; credentials, never shown.
        let odd = " contains a query, fragment, whitespace or control character;";
        let credentials = "base URL contains a user name or password ('@');";
        for (raw, said) in [
            ("http://h/a?b", odd),
            ("http://h/a#b", odd),
            ("http://h/a b", odd),
            ("http://h/a\u{7}b", odd),
            ("http://user:pw@h", credentials),
            ("ftp://user:pw@h", credentials),
            ("user:pw@h", credentials),
            ("http://h/x@y", credentials),
        ] {
            let err = base_url(raw).unwrap_err();
            assert!(err.contains(said), "{raw:?}: {err}");
            assert!(!err.contains("pw"), "{err}");
        }
    }

    #[test]
    fn only_the_api_root_is_qwenpaws_api() {
        assert_eq!(api_path_problem("http://h:1/api"), None);
        let err = api_path_problem("http://h:1/api/api").unwrap();
        assert!(err.contains("write http://h:1,"), "{err}");
        assert!(api_path_problem("http://h:1/prefix/api").is_some());
    }

    #[test]
    fn timestamps_and_durations_are_bounded() {
        assert!(timestamp(Timestamp::from_unix(0)).is_ok());
        assert!(timestamp(Timestamp::parse("2199-12-31T23:59:59Z").unwrap()).is_ok());
        assert!(timestamp(Timestamp::parse("2200-01-01T00:00:00Z").unwrap()).is_err());
        assert!(timestamp(Timestamp::parse("5138-01-01T00:00:00Z").unwrap()).is_err());
        assert!(duration(MAX_DURATION).is_ok());
        assert!(parse_duration("3650d").is_ok(), "ten years");
        assert!(parse_duration("3651d").is_err());
        assert!(duration(Duration::from_secs(u64::MAX)).is_err());
    }

    #[test]
    fn tokens_are_printable_ascii_and_never_shown() {
        assert!(token("abc-DEF_123.~+/=").is_ok());
        for bad in ["s3cr3t\r", "s3 cr3t", "s3cr3t\n", "s3cr3tü", "\x00"] {
            let err = token(bad).unwrap_err();
            assert!(!err.contains("s3"), "{err}");
        }
        assert!(token("s3cr3t\r").unwrap_err().contains("carriage return"));
        for (bad, said) in [
            ("s3cr3t\n", "contains a line feed (\\n) at position 7;"),
            ("s3 cr3t", "contains a space at position 3;"),
            (
                "s3\x07",
                "contains a control character (\\u{7}) at position 3;",
            ),
            (
                "s3cr3tü",
                "contains a character that is not printable ASCII at position 7;",
            ),
        ] {
            let err = token(bad).unwrap_err();
            assert!(err.starts_with(said), "{bad:?}: {err}");
        }
    }

    #[test]
    fn counts_say_their_range() {
        assert_eq!(count(" 8 ", &(1..=8)), Ok(8));
        assert_eq!(count("9", &(1..=8)), Err("9 is not from 1 to 8".to_owned()));
        assert_eq!(
            count("0", &(1..=u32::MAX)),
            Err("0 is less than 1".to_owned())
        );
        assert_eq!(
            count("x", &(1..=8)),
            Err("\"x\" is not a whole number".to_owned())
        );
    }

    #[test]
    fn job_ids() {
        assert!(job_id("3f9a0c1b2d4e").is_ok());
        assert!(job_id(&"a".repeat(MAX_JOB_ID)).is_ok());
        for bad in ["", "../x", &"a".repeat(65), "a b"] {
            assert!(job_id(bad).is_err(), "{bad:?}");
        }
    }
}
