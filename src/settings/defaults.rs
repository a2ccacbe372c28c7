//! The defaults, in one place (`--help` shows them; a test keeps the two in step).

use std::time::Duration;

/// Where QwenPaw's `qwenpaw app` listens by default.
pub const BASE_URL: &str = "http://127.0.0.1:8088";
pub const USER: &str = "default";
pub const CHANNEL: &str = "console";
pub const AGENT: &str = "default";
pub const CONCURRENCY: u32 = 8;
pub const HTTP_TIMEOUT: Duration = Duration::from_secs(30);
/// The seed's MAX_STRIKES: ~30 min of 20 s ticks.
pub const MAX_STRIKES: u32 = 90;
/// The seed's MAX_JOB_AGE.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 3600);
pub const BUSY_RETRY: Duration = Duration::from_secs(20);
/// Long enough for a parent agent's longest turns; the seed gave up after 10 minutes.
pub const BUSY_DEADLINE: Duration = Duration::from_secs(6 * 3600);
/// Levels a follow-up goes up a delegation tree: P → child → … five levels down.
pub const FOLLOW_UP_DEPTH: u32 = 5;
/// The longest wait between two polls of a child whose turn's end atc's plugin kicks.
pub const POLL_CEILING: Duration = Duration::from_secs(300);
pub const KEEP: Duration = Duration::from_secs(7 * 24 * 3600);
/// `atc wait` polls this often.
pub const WAIT_INTERVAL: Duration = Duration::from_secs(3);
/// `atc doctor` gives each request this long.
pub const DOCTOR_TIMEOUT: Duration = Duration::from_secs(5);
/// How often the timer units run `atc tick`.
pub const TICK_INTERVAL: Duration = Duration::from_secs(20);
