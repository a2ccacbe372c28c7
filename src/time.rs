//! Timestamps as the job file stores them: RFC 3339, UTC, whole seconds.
//! The clock is read only at the edges (`Timestamp::now`); the job logic takes `now` as input.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
}
