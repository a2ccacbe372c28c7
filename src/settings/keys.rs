//! The settings a person can keep in the config file, each with the flag and the
//! environment variable that beat it, and the one validator all three go through.

use std::path::PathBuf;
use std::time::Duration;

use crate::validate;

/// What kind of value a key holds, and so how it is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An absolute path (`~/` is the home directory).
    Path,
    /// A QwenPaw base URL (`validate::base_url`).
    Url,
    /// A duration (`validate::parse_duration`).
    Duration,
    /// A timeout: a duration longer than zero (a zero timeout fails every request at once).
    Timeout,
    /// A whole number in a range.
    Count(&'static std::ops::RangeInclusive<u32>),
    Bool,
}

/// One setting of the config file.
#[derive(Debug)]
pub struct Key {
    /// The key in the file, kebab-case like the flag.
    pub name: &'static str,
    /// The environment variable that beats the file.
    pub env: &'static str,
    /// The flag that beats both, and the command it belongs to (`tick`), if any.
    pub flag: Option<&'static str>,
    pub kind: Kind,
    /// What it does, for `config show --json` and the guide.
    pub about: &'static str,
}

/// Every key the config file may hold, in the order `config show` lists them.
pub const KEYS: [Key; 14] = [
    Key {
        name: "state",
        env: "ATC_STATE",
        flag: Some("--state"),
        kind: Kind::Path,
        about: "the job file",
    },
    Key {
        name: "base-url",
        env: "ATC_BASE_URL",
        flag: Some("--base-url"),
        kind: Kind::Url,
        about: "the QwenPaw URL recorded into new watches",
    },
    Key {
        name: "max-age",
        env: "ATC_MAX_AGE",
        flag: Some("--max-age"),
        kind: Kind::Duration,
        about: "a task not finished this long after `watch` expires",
    },
    Key {
        name: "busy-deadline",
        env: "ATC_BUSY_DEADLINE",
        flag: Some("--busy-deadline"),
        kind: Kind::Duration,
        about: "how long a delivery waits for a busy or unreachable parent chat",
    },
    Key {
        name: "busy-retry",
        env: "ATC_BUSY_RETRY",
        flag: Some("--busy-retry"),
        kind: Kind::Duration,
        about: "the wait before posting again after a 409 from the parent chat",
    },
    Key {
        name: "keep",
        env: "ATC_KEEP",
        flag: Some("--keep"),
        kind: Kind::Duration,
        about: "how long ended jobs stay in the job file",
    },
    Key {
        name: "max-strikes",
        env: "ATC_MAX_STRIKES",
        flag: Some("--max-strikes"),
        kind: Kind::Count(&validate::STRIKES),
        about: "failed checks in a row before a job is abandoned",
    },
    Key {
        name: "follow-up-depth",
        env: "ATC_FOLLOW_UP_DEPTH",
        flag: Some("--follow-up-depth"),
        kind: Kind::Count(&validate::FOLLOW_UP_DEPTH),
        about: "levels a child's later reply goes up a delegation tree as a follow-up (0: none)",
    },
    Key {
        name: "poll-ceiling",
        env: "ATC_POLL_CEILING",
        flag: Some("--poll-ceiling"),
        kind: Kind::Timeout,
        about: "the longest wait between two polls of a child whose turn's end atc's QwenPaw plugin kicks",
    },
    Key {
        name: "concurrency",
        env: "ATC_CONCURRENCY",
        flag: Some("--concurrency"),
        kind: Kind::Count(&validate::CONCURRENCY),
        about: "polls and deliveries in flight at once",
    },
    Key {
        name: "http-timeout",
        env: "ATC_HTTP_TIMEOUT",
        flag: Some("--http-timeout"),
        kind: Kind::Timeout,
        about: "the timeout of each HTTP phase",
    },
    Key {
        name: "turn-timeout",
        env: "ATC_TURN_TIMEOUT",
        flag: Some("--turn-timeout"),
        kind: Kind::Timeout,
        about: "QwenPaw stops a woken parent turn after this long",
    },
    Key {
        name: "no-batch",
        env: "ATC_NO_BATCH",
        flag: Some("--no-batch"),
        kind: Kind::Bool,
        about: "one result per parent turn instead of everything due for a chat together",
    },
    Key {
        name: "auto-watch",
        env: "ATC_AUTO_WATCH",
        flag: None,
        kind: Kind::Bool,
        about: "atc's QwenPaw plugin watches every background task a turn's submit_to_agent started, by itself, when the turn ends",
    },
];

/// The key called `name`.
pub fn key(name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.name == name)
}

/// The key called `name`, or why there is none, with the nearest known key.
pub fn known(name: &str) -> Result<&'static Key, String> {
    key(name).ok_or_else(|| unknown(name))
}

/// "unknown key …", with the nearest known one when one is near. Never echoes more than a
/// preview: a line pasted into the wrong file may hold a token.
pub fn unknown(name: &str) -> String {
    let shown = crate::text::preview(name);
    if looks_like_a_token(name) {
        return format!(
            "unknown key {shown}: tokens never go in the config file; keep QWENPAW_RUNTIME_INTERNAL_TOKEN or ATC_BEARER_TOKEN in the environment (~/.config/atc/env for the timer)"
        );
    }
    match nearest(name) {
        Some(near) => format!("unknown key {shown} (did you mean {near:?}?)"),
        None => format!(
            "unknown key {shown} (the keys: {})",
            KEYS.iter().map(|k| k.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

fn looks_like_a_token(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.contains("token") || name.contains("password") || name.contains("secret")
}

/// The known key closest to `name` (the environment variable's spelling, `_` for `-`,
/// a `[tick]` table's `tick.max-age` and small typos all count), if one is close.
fn nearest(name: &str) -> Option<&'static str> {
    let plain = name
        .trim()
        .to_ascii_lowercase()
        .trim_start_matches("atc_")
        .rsplit('.')
        .next()
        .unwrap_or_default()
        .replace('_', "-");
    KEYS.iter()
        .map(|k| (distance(&plain, k.name), k.name))
        .filter(|(d, known)| *d <= known.len().max(3) / 3)
        .min()
        .map(|(_, known)| known)
}

/// Levenshtein distance, by characters.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// A checked value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Path(PathBuf),
    /// A base URL as written (it is normalised where it is used).
    Url(String),
    Duration(Duration),
    Count(u32),
    Bool(bool),
}

impl Value {
    /// As `config show` and `config get` print it (and as the file can take it back).
    pub fn shown(&self) -> String {
        match self {
            Value::Path(path) => path.display().to_string(),
            Value::Url(url) => url.clone(),
            Value::Duration(d) => compact(*d),
            Value::Count(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
        }
    }

    /// As `config show --json` prints it.
    pub fn json(&self) -> serde_json::Value {
        match self {
            Value::Count(n) => (*n).into(),
            Value::Bool(b) => (*b).into(),
            other => other.shown().into(),
        }
    }
}

/// A duration in its largest exact unit (`3d`, `90m`, `45s`, `1500ms`): what people write,
/// and what humantime reads back.
pub fn compact(d: Duration) -> String {
    if d.subsec_nanos() != 0 {
        return format!("{}ms", d.as_millis());
    }
    let secs = d.as_secs();
    for (size, unit) in [(86_400, "d"), (3_600, "h"), (60, "m")] {
        if secs != 0 && secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}

impl Kind {
    /// Checks text from the command line or the environment.
    pub fn parse(self, text: &str, home: Option<&std::path::Path>) -> Result<Value, String> {
        match self {
            Kind::Path => path(text, home).map(Value::Path),
            Kind::Url => validate::base_url(text).map(|_| Value::Url(text.trim().to_owned())),
            Kind::Duration => validate::parse_duration(text).map(Value::Duration),
            Kind::Timeout => validate::parse_timeout(text).map(Value::Duration),
            Kind::Count(range) => validate::count(text, range).map(Value::Count),
            Kind::Bool => validate::boolean(text).map(Value::Bool),
        }
    }

    /// Checks a value from the config file: the TOML type first (a duration is a string,
    /// `max-age = "3d"`; a count a number; a switch `true` or `false`), then as text.
    pub fn from_toml(
        self,
        value: &toml::Value,
        home: Option<&std::path::Path>,
    ) -> Result<Value, String> {
        match (self, value) {
            (
                Kind::Path | Kind::Url | Kind::Duration | Kind::Timeout,
                toml::Value::String(text),
            ) => self.parse(text, home),
            (Kind::Count(range), toml::Value::Integer(n)) => u32::try_from(*n)
                .ok()
                .filter(|n| range.contains(n))
                .map(Value::Count)
                .ok_or_else(|| validate::count(&n.to_string(), range).unwrap_err()),
            (Kind::Bool, toml::Value::Boolean(b)) => Ok(Value::Bool(*b)),
            (kind, other) => {
                let found = other.type_str();
                let article = if found.starts_with(['a', 'e', 'i', 'o', 'u']) {
                    "an"
                } else {
                    "a"
                };
                Err(format!(
                    "is {article} {found}, and it must be {}",
                    kind.wanted()
                ))
            }
        }
    }

    /// The TOML value `config set` writes for a checked value.
    pub fn to_toml(value: &Value) -> toml_edit::Value {
        match value {
            Value::Count(n) => i64::from(*n).into(),
            Value::Bool(b) => (*b).into(),
            other => other.shown().into(),
        }
    }

    /// What a value of this kind looks like, for messages.
    pub fn wanted(self) -> &'static str {
        match self {
            Kind::Path => {
                "a string holding an absolute path (\"/srv/atc/jobs.json\", \"~/atc/jobs.json\")"
            }
            Kind::Url => "a string holding a URL (\"http://127.0.0.1:8088\")",
            Kind::Duration | Kind::Timeout => {
                "a string holding a duration (\"30s\", \"5m\", \"24h\", \"3d\")"
            }
            Kind::Count(_) => "a whole number (no quotes)",
            Kind::Bool => "true or false (no quotes)",
        }
    }
}

/// An absolute path; `~/…` is under the home directory. A relative one is refused: the
/// timer, the plugin's kicks and a shell each run in another directory.
fn path(text: &str, home: Option<&std::path::Path>) -> Result<PathBuf, String> {
    if text.is_empty() {
        return Err("is empty: name a file".to_owned());
    }
    if let Some(rest) = text.strip_prefix("~/") {
        return match home {
            Some(home) => Ok(home.join(rest)),
            None => Err("starts with ~/, and there is no home directory".to_owned()),
        };
    }
    let path = PathBuf::from(text);
    if path.is_relative() {
        return Err(format!(
            "{} is a relative path: write it absolute (or from ~/), since the timer, the plugin's kicks and your shell each run in another directory",
            crate::text::preview(text)
        ));
    }
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_keys_catch_the_usual_slips() {
        for (typo, near) in [
            ("max_age", "max-age"),
            ("maxage", "max-age"),
            ("max-ages", "max-age"),
            ("ATC_MAX_AGE", "max-age"),
            ("tick.busy-deadline", "busy-deadline"),
            ("kep", "keep"),
            ("base_url", "base-url"),
            ("nobatch", "no-batch"),
            ("auto_watch", "auto-watch"),
            // Up to a third of the key's length in edits: two of busy-deadline's 13.
            ("bsy-dedline", "busy-deadline"),
        ] {
            assert_eq!(nearest(typo), Some(near), "{typo}");
        }
        assert_eq!(nearest("colour"), None);
        assert!(unknown("colour").contains("the keys: state, base-url"));
        for secret in ["bearer-token", "password", "client_secret"] {
            let said = unknown(secret);
            assert!(
                said.contains("tokens never go in the config file"),
                "{secret}: {said}"
            );
        }
    }

    /// Levenshtein's distance, by characters: insertions, deletions and substitutions
    /// count one each, from either side.
    #[test]
    fn distance_counts_each_edit_once() {
        for (a, b, d) in [
            ("", "", 0),
            ("", "abc", 3),
            ("abc", "", 3),
            ("keep", "kep", 1),
            ("kep", "keep", 1),
            ("ab", "ba", 2),
            ("max-äge", "max-age", 1),
            ("kitten", "sitting", 3),
        ] {
            assert_eq!(distance(a, b), d, "{a:?} {b:?}");
        }
    }

    #[test]
    fn durations_are_written_in_their_largest_exact_unit() {
        for (secs, shown) in [
            (259_200, "3d"),
            (5_400, "90m"),
            (3_600, "1h"),
            (45, "45s"),
            (0, "0s"),
        ] {
            let d = Duration::from_secs(secs);
            assert_eq!(compact(d), shown);
            assert_eq!(validate::parse_duration(shown), Ok(d));
        }
        assert_eq!(compact(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn each_kind_takes_its_toml_type_only() {
        let home = std::path::Path::new("/home/u");
        let int = toml::Value::Integer(3);
        let text = |s: &str| toml::Value::String(s.to_owned());
        assert_eq!(
            Kind::Duration.from_toml(&text("3d"), None),
            Ok(Value::Duration(Duration::from_secs(259_200)))
        );
        assert!(
            Kind::Duration
                .from_toml(&int, None)
                .unwrap_err()
                .starts_with("is an integer, and it must be a string holding a duration")
        );
        assert_eq!(
            Kind::Count(&validate::STRIKES).from_toml(&int, None),
            Ok(Value::Count(3))
        );
        assert!(
            Kind::Count(&validate::CONCURRENCY)
                .from_toml(&toml::Value::Integer(1000), None)
                .is_err()
        );
        assert!(
            Kind::Count(&validate::STRIKES)
                .from_toml(&toml::Value::Integer(-1), None)
                .is_err()
        );
        assert!(Kind::Bool.from_toml(&text("true"), None).is_err());
        assert_eq!(
            Kind::Path.from_toml(&text("~/j.json"), Some(home)),
            Ok(Value::Path(home.join("j.json")))
        );
        assert!(Kind::Path.from_toml(&text("j.json"), Some(home)).is_err());
        assert!(Kind::Url.from_toml(&text("ftp://h"), None).is_err());
    }
}
