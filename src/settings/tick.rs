//! The tick's knobs (caps, back-off, the pass's own), resolved for every command that
//! changes the job file: `tick` takes them from its flags, the environment, the config
//! file or the defaults; `watch`, `cancel` and `redeliver` tidy the file under the same
//! `keep` the tick uses; `import-plugin-state` expires by the same `max-age`.

use std::path::PathBuf;
use std::time::Duration;

use super::env::Environment;
use super::file::ConfigFile;
use super::keys::{self, Value};
use super::{Auth, Setting, Source, Tick, defaults};
use crate::cli;
use crate::exit::{Exit, Failure};
use crate::lifecycle::Limits;

/// The tick's caps and back-off when nothing changes them.
pub fn default_limits() -> Limits {
    Limits {
        max_strikes: defaults::MAX_STRIKES,
        max_age: defaults::MAX_AGE,
        busy_retry: defaults::BUSY_RETRY,
        busy_deadline: defaults::BUSY_DEADLINE,
        settle: defaults::HTTP_TIMEOUT,
        keep: defaults::KEEP,
        follow_up_depth: defaults::FOLLOW_UP_DEPTH,
        poll_ceiling: defaults::POLL_CEILING,
    }
}

/// Every knob of the config file but the job file and the base URL, each with its source.
#[derive(Clone, Debug)]
pub struct Knobs {
    pub max_age: Setting<Duration>,
    pub busy_deadline: Setting<Duration>,
    pub busy_retry: Setting<Duration>,
    pub keep: Setting<Duration>,
    pub max_strikes: Setting<u32>,
    pub follow_up_depth: Setting<u32>,
    pub poll_ceiling: Setting<Duration>,
    pub concurrency: Setting<u32>,
    pub http_timeout: Setting<Duration>,
    /// None: QwenPaw's own (1h).
    pub turn_timeout: Option<Setting<Duration>>,
    pub no_batch: Setting<bool>,
    /// Whether atc's QwenPaw plugin watches, by itself, every background task a turn's
    /// `submit_to_agent` started (`watch --origin auto`): on unless `ATC_AUTO_WATCH` or the
    /// config file's `auto-watch` turns it off. The one reader of the setting: the plugin
    /// asks atc, which decides by it.
    pub auto_watch: Setting<bool>,
}

impl Knobs {
    /// The knobs from `tick`'s flags (None for every other command), else the environment,
    /// else the config file, else the defaults.
    pub fn resolve(
        flags: Option<&cli::TickArgs>,
        env: &dyn Environment,
        file: &ConfigFile,
    ) -> Result<Knobs, Failure> {
        let home = env.home();
        let layer =
            |name: &'static str, flag: Option<Value>| -> Result<Option<Setting<Value>>, Failure> {
                let key = keys::key(name).expect("a known key");
                if let Some(value) = flag {
                    return Ok(Some(Setting {
                        value,
                        source: Source::Flag(key.flag.expect("a flag")),
                    }));
                }
                if let Some(text) = env.var(key.env) {
                    let value = key
                        .kind
                        .parse(&text, home.as_deref())
                        .map_err(|why| Failure::new(Exit::Usage, format!("{}: {why}", key.env)))?;
                    return Ok(Some(Setting {
                        value,
                        source: Source::Env(key.env),
                    }));
                }
                Ok(file.get(name))
            };
        let duration = |name, flag: Option<Duration>, default: Duration| {
            Ok::<_, Failure>(match layer(name, flag.map(Value::Duration))? {
                Some(Setting {
                    value: Value::Duration(d),
                    source,
                }) => Setting { value: d, source },
                Some(other) => unreachable!("{name} holds a duration: {other:?}"),
                None => Setting {
                    value: default,
                    source: Source::Default,
                },
            })
        };
        let count = |name, flag: Option<u32>, default: u32| {
            Ok::<_, Failure>(match layer(name, flag.map(Value::Count))? {
                Some(Setting {
                    value: Value::Count(n),
                    source,
                }) => Setting { value: n, source },
                Some(other) => unreachable!("{name} holds a count: {other:?}"),
                None => Setting {
                    value: default,
                    source: Source::Default,
                },
            })
        };
        let switch = |name, flag: bool, default: bool| {
            Ok::<_, Failure>(match layer(name, flag.then_some(Value::Bool(true)))? {
                Some(Setting {
                    value: Value::Bool(b),
                    source,
                }) => Setting { value: b, source },
                Some(other) => unreachable!("{name} is a switch: {other:?}"),
                None => Setting {
                    value: default,
                    source: Source::Default,
                },
            })
        };
        let f = |pick: fn(&cli::TickArgs) -> Option<Duration>| flags.and_then(pick);
        let turn_timeout =
            layer("turn-timeout", f(|a| a.turn_timeout).map(Value::Duration))?.map(|s| {
                match s.value {
                    Value::Duration(d) => Setting {
                        value: d,
                        source: s.source,
                    },
                    other => unreachable!("turn-timeout holds a duration: {other:?}"),
                }
            });
        Ok(Knobs {
            max_age: duration("max-age", f(|a| a.max_age), defaults::MAX_AGE)?,
            busy_deadline: duration(
                "busy-deadline",
                f(|a| a.busy_deadline),
                defaults::BUSY_DEADLINE,
            )?,
            busy_retry: duration("busy-retry", f(|a| a.busy_retry), defaults::BUSY_RETRY)?,
            keep: duration("keep", f(|a| a.keep), defaults::KEEP)?,
            max_strikes: count(
                "max-strikes",
                flags.and_then(|a| a.max_strikes),
                defaults::MAX_STRIKES,
            )?,
            poll_ceiling: duration(
                "poll-ceiling",
                f(|a| a.poll_ceiling),
                defaults::POLL_CEILING,
            )?,
            follow_up_depth: count(
                "follow-up-depth",
                flags.and_then(|a| a.follow_up_depth),
                defaults::FOLLOW_UP_DEPTH,
            )?,
            concurrency: count(
                "concurrency",
                flags.and_then(|a| a.concurrency),
                defaults::CONCURRENCY,
            )?,
            http_timeout: duration(
                "http-timeout",
                f(|a| a.http_timeout),
                defaults::HTTP_TIMEOUT,
            )?,
            turn_timeout,
            no_batch: switch("no-batch", flags.is_some_and(|a| a.no_batch), false)?,
            auto_watch: switch("auto-watch", false, true)?,
        })
    }

    /// The caps and back-off the state machines work within.
    pub fn limits(&self) -> Limits {
        Limits {
            max_strikes: self.max_strikes.value,
            max_age: self.max_age.value,
            busy_retry: self.busy_retry.value,
            busy_deadline: self.busy_deadline.value,
            // A POST that may have reached the server has had the whole request timeout to
            // start its turn before the same turn is posted again.
            settle: self.http_timeout.value,
            keep: self.keep.value,
            follow_up_depth: self.follow_up_depth.value,
            poll_ceiling: self.poll_ceiling.value,
        }
    }

    /// Each knob as a config-file key, its value (None: unset, QwenPaw's own) and source.
    pub fn rows(&self) -> Vec<(&'static str, Option<Value>, Source)> {
        let d =
            |name, s: &Setting<Duration>| (name, Some(Value::Duration(s.value)), s.source.clone());
        let n = |name, s: &Setting<u32>| (name, Some(Value::Count(s.value)), s.source.clone());
        let b = |name, s: &Setting<bool>| (name, Some(Value::Bool(s.value)), s.source.clone());
        vec![
            d("max-age", &self.max_age),
            d("busy-deadline", &self.busy_deadline),
            d("busy-retry", &self.busy_retry),
            d("keep", &self.keep),
            n("max-strikes", &self.max_strikes),
            n("follow-up-depth", &self.follow_up_depth),
            d("poll-ceiling", &self.poll_ceiling),
            n("concurrency", &self.concurrency),
            d("http-timeout", &self.http_timeout),
            match &self.turn_timeout {
                Some(s) => d("turn-timeout", s),
                None => ("turn-timeout", None, Source::Default),
            },
            b("no-batch", &self.no_batch),
            b("auto-watch", &self.auto_watch),
        ]
    }
}

pub(super) fn tick(
    args: &cli::TickArgs,
    state: Setting<PathBuf>,
    auth: Auth,
    knobs: &Knobs,
    cadence: bool,
    server: Option<String>,
) -> Tick {
    Tick {
        state,
        limits: knobs.limits(),
        concurrency: knobs.concurrency.value as usize,
        http_timeout: knobs.http_timeout.value,
        turn_timeout: knobs.turn_timeout.as_ref().map(|s| s.value),
        auth,
        kicked: args.kicked,
        cadence: cadence && !args.kicked,
        server: server.filter(|_| args.kicked || cadence),
        batch: !knobs.no_batch.value,
    }
}
