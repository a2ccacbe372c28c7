//! Timestamps as the job file stores them: RFC 3339, UTC, whole seconds.
//! The clock is read only at the edges (`Timestamp::now`); the job logic takes `now` as input.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Where a tick reads the time: the system clock in production, a simulated one in the
/// simulation (`tests/sim`), where hours of deadlines pass without sleeping.
pub trait Clock: Sync {
    fn now(&self) -> Timestamp;
}

/// The real clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(SystemTime);

impl Timestamp {
    /// The current time, truncated to whole seconds (what the file can hold).
    pub fn now() -> Timestamp {
        Timestamp::from_unix(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        )
    }

    pub fn from_unix(secs: u64) -> Timestamp {
        Timestamp(UNIX_EPOCH + Duration::from_secs(secs))
    }

    /// From QwenPaw's float epoch seconds (`started_at`), if it is a sane value.
    pub fn from_unix_f64(secs: f64) -> Option<Timestamp> {
        (0.0..1e12)
            .contains(&secs)
            .then(|| Timestamp::from_unix(secs as u64))
    }

    pub fn parse(text: &str) -> Option<Timestamp> {
        humantime::parse_rfc3339_weak(text)
            .ok()
            .map(Timestamp)
            .filter(|t| t.0 >= UNIX_EPOCH)
    }

    /// How long ago `self` was, seen from `now` (zero if in the future).
    pub fn elapsed_at(self, now: Timestamp) -> Duration {
        now.0.duration_since(self.0).unwrap_or(Duration::ZERO)
    }

    pub fn saturating_add(self, d: Duration) -> Timestamp {
        Timestamp(self.0.checked_add(d).unwrap_or(self.0))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_rfc3339_seconds(self.0))
    }
}

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Timestamp {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Timestamp::parse(&text).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "invalid RFC 3339 timestamp {}",
                crate::validate::preview(&text)
            ))
        })
    }
}

/// A duration for people: whole seconds, humantime style (`3m 20s`).
pub fn human(d: Duration) -> String {
    humantime::format_duration(Duration::from_secs(d.as_secs())).to_string()
}

/// An age for people at a glance: at most two units, short (`11mo 30d`, `4h 49m`,
/// `3m 20s`, `42s`). Years and months are humantime's (365.25 and 30.44 days), so it
/// agrees with [`human`] on what it shows.
pub fn age(d: Duration) -> String {
    const UNITS: [(u64, &str); 6] = [
        (31_557_600, "y"),
        (2_630_016, "mo"),
        (86_400, "d"),
        (3_600, "h"),
        (60, "m"),
        (1, "s"),
    ];
    let mut left = d.as_secs();
    let mut parts = Vec::new();
    for (size, name) in UNITS {
        if left >= size || !parts.is_empty() {
            parts.push(format!("{}{name}", left / size));
            left %= size;
        }
        if parts.len() == 2 {
            break;
        }
    }
    // A second unit of 0 says nothing: `2h`, not `2h 0m`.
    parts.retain(|p| !p.starts_with('0'));
    if parts.is_empty() {
        return "0s".to_owned();
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_rfc3339_utc_seconds() {
        let t = Timestamp::parse("2026-11-30T20:14:03Z").unwrap();
        assert_eq!(t.to_string(), "2026-11-30T20:14:03Z");
        let json = serde_json::to_string(&t).unwrap();
        assert_eq!(json, "\"2026-11-30T20:14:03Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&json).unwrap(), t);
        assert!(serde_json::from_str::<Timestamp>("\"yesterday\"").is_err());
    }

    #[test]
    fn elapsed_never_negative() {
        let a = Timestamp::from_unix(100);
        let b = Timestamp::from_unix(160);
        assert_eq!(a.elapsed_at(b), Duration::from_secs(60));
        assert_eq!(b.elapsed_at(a), Duration::ZERO);
        assert_eq!(
            Timestamp::from_unix_f64(1796003454.67),
            Some(Timestamp::from_unix(1796003454))
        );
        assert_eq!(Timestamp::from_unix_f64(f64::NAN), None);
    }

    #[test]
    fn ages_have_at_most_two_units() {
        let secs = Duration::from_secs;
        for (d, want) in [
            (secs(0), "0s"),
            (secs(42), "42s"),
            (secs(200), "3m 20s"),
            (secs(180), "3m"),
            (secs(7200), "2h"),
            (secs(4 * 3600 + 49 * 60 + 25), "4h 49m"),
            (secs(86_400 + 5), "1d"),
            (secs(2 * 31_557_600 + 3 * 2_630_016 + 99), "2y 3mo"),
            (secs(11 * 2_630_016 + 30 * 86_400 + 4 * 3600), "11mo 30d"),
        ] {
            assert_eq!(age(d), want, "{d:?}");
        }
    }
}
