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
        // Read in place (no copy of the text): a job file holds thousands of them.
        struct Rfc3339;
        impl serde::de::Visitor<'_> for Rfc3339 {
            type Value = Timestamp;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, text: &str) -> Result<Timestamp, E> {
                Timestamp::parse(text).ok_or_else(|| {
                    E::custom(format!(
                        "invalid RFC 3339 timestamp {}",
                        crate::text::preview(text)
                    ))
                })
            }
        }
        deserializer.deserialize_str(Rfc3339)
    }
}

/// A duration for people, in the one format atc writes every duration and age in: whole
/// seconds as days, hours, minutes and seconds, largest first, a unit of 0 left out (`1d 1h`,
/// `4h 49m`, `3m 20s`, `42s`, `0s`; `400d 3h` rather than months and years, whose length
/// varies). Exact: every unit is there, so humantime (and every atc flag) reads it back.
pub fn human(d: Duration) -> String {
    units(d, usize::MAX)
}

/// An age for people at a glance: [`human`] cut to its two largest units (`1d 1h`,
/// `4h 49m`, `3m 20s`, `42s`), never more; a second unit of 0 is left out (`2h`).
pub fn age(d: Duration) -> String {
    units(d, 2)
}

/// `d` in days, hours, minutes and seconds, from the largest unit it has, at most `most`
/// units counted from there, zero ones left out.
fn units(d: Duration, most: usize) -> String {
    const UNITS: [(u64, &str); 4] = [(86_400, "d"), (3_600, "h"), (60, "m"), (1, "s")];
    let mut left = d.as_secs();
    let mut parts = Vec::new();
    let mut counted = 0;
    for (size, name) in UNITS {
        if counted == most {
            break;
        }
        if left >= size || counted > 0 {
            counted += 1;
            if left >= size {
                parts.push(format!("{}{name}", left / size));
            }
            left %= size;
        }
    }
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
        // A job file with a wrong timestamp is refused saying what it found and wanted.
        let err = |json| {
            serde_json::from_str::<Timestamp>(json)
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            err("\"yesterday\""),
            "invalid RFC 3339 timestamp \"yesterday\" at line 1 column 11"
        );
        assert_eq!(
            err("12"),
            "invalid type: integer `12`, expected a string at line 1 column 2"
        );
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
            (secs(86_400 + 3600 + 5), "1d 1h"),
            (secs(400 * 86_400 + 3 * 3600 + 99), "400d 3h"),
        ] {
            assert_eq!(age(d), want, "{d:?}");
        }
    }

    #[test]
    fn durations_are_exact_in_the_same_units_and_read_back() {
        let secs = Duration::from_secs;
        for (d, want) in [
            (secs(0), "0s"),
            (secs(90), "1m 30s"),
            (secs(86_400 + 3600), "1d 1h"),
            (secs(86_400 + 5), "1d 5s"),
            (secs(400 * 86_400 + 3 * 3600 + 99), "400d 3h 1m 39s"),
            (Duration::from_millis(1500), "1s"),
        ] {
            assert_eq!(human(d), want, "{d:?}");
            assert_eq!(
                humantime::parse_duration(&human(d)).unwrap(),
                secs(d.as_secs())
            );
        }
        // An age is the start of the same text.
        let d = secs(3 * 86_400 + 7 * 3600 + 5 * 60);
        assert!(human(d).starts_with(&age(d)), "{} / {}", human(d), age(d));
    }
}
