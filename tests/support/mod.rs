#![allow(dead_code)]

pub mod atc;
pub mod bodies;
pub mod chats;
pub mod fake;
pub mod hermetic;
pub mod rng;
pub mod scene;
pub mod shape;

/// Unix seconds, `secs` ago (the times the seed plugin's state file holds).
pub fn unix_secs_ago(secs: u64) -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        - secs
}

/// The job file's timestamp of `secs` ago.
pub fn ago(secs: u64) -> String {
    ::atc::time::Timestamp::from_unix(unix_secs_ago(secs)).to_string()
}
