//! One module per command: the imperative shell around `lifecycle`.

pub mod cancel;
pub mod status;
pub mod tick;
pub mod watch;

use crate::job::Job;

/// "session s-77 (user default, channel console)": where a result goes, for people.
pub fn describe_chat(job: &Job) -> String {
    format!(
        "session {} (user {}, channel {})",
        job.session_id, job.user_id, job.channel
    )
}

/// Prints a job record, as it is in the file, as one JSON document.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}
