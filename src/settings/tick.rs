//! `atc tick`: the caps, the back-off and the pass's own knobs.

use std::path::PathBuf;

use super::{Auth, Setting, Tick, defaults};
use crate::cli;
use crate::lifecycle::Limits;

/// The tick's caps and back-off when no flag changes them.
pub fn default_limits() -> Limits {
    Limits {
        max_strikes: defaults::MAX_STRIKES,
        max_age: defaults::MAX_AGE,
        busy_retry: defaults::BUSY_RETRY,
        busy_deadline: defaults::BUSY_DEADLINE,
        settle: defaults::HTTP_TIMEOUT,
        keep: defaults::KEEP,
    }
}

pub(super) fn tick(args: cli::TickArgs, state: Setting<PathBuf>, auth: Auth) -> Tick {
    let limits = default_limits();
    let http_timeout = args.http_timeout.unwrap_or(defaults::HTTP_TIMEOUT);
    Tick {
        state,
        limits: Limits {
            max_strikes: args.max_strikes.unwrap_or(limits.max_strikes),
            max_age: args.max_age.unwrap_or(limits.max_age),
            busy_retry: args.busy_retry.unwrap_or(limits.busy_retry),
            busy_deadline: args.busy_deadline.unwrap_or(limits.busy_deadline),
            // A POST that may have reached the server has had the whole request timeout to
            // start its turn before the same turn is posted again.
            settle: http_timeout,
            keep: args.keep.unwrap_or(limits.keep),
        },
        concurrency: args.concurrency.unwrap_or(defaults::CONCURRENCY) as usize,
        http_timeout,
        turn_timeout: args.turn_timeout,
        auth,
        kicked: args.kicked,
        batch: !args.no_batch,
    }
}
