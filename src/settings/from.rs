//! `--from`: the text that names the tasks to watch.

use std::path::Path;

use crate::exit::{Exit, Failure};
use crate::state::fsutil::read_at_most;

/// The text `--from` names: a file, or standard input for `-`. Over 1 MiB it is refused,
/// not cut: a cut could end inside a task id.
pub(super) fn read_from(from: &Path) -> Result<(String, String), Failure> {
    const MAX: u64 = 1024 * 1024;
    let (result, shown) = if from.as_os_str() == "-" {
        (
            read_at_most(std::io::stdin(), MAX),
            "- (standard input)".to_owned(),
        )
    } else {
        let shown = format!("{:?}", from.display().to_string());
        (
            std::fs::File::open(from).and_then(|f| read_at_most(f, MAX)),
            shown,
        )
    };
    let refused = |why: String| Failure::new(Exit::Usage, format!("--from {shown}: {why}"));
    let bytes = result.map_err(|e| match e.kind() {
        std::io::ErrorKind::FileTooLarge => refused(format!(
            "{e}; give atc the part with the [TASK_ID: …] lines (or the task ids as arguments)"
        )),
        _ => refused(e.to_string()),
    })?;
    let text = String::from_utf8(bytes).map_err(|_| {
        refused("is not UTF-8 text; give atc the text submit_to_agent printed".to_owned())
    })?;
    Ok((text, shown))
}
