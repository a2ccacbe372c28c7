//! `--from`: the text that names the tasks to watch.

use std::path::Path;

use crate::exit::{Exit, Failure};

/// The text `--from` names: a file, or standard input for `-`. Over 1 MiB it is refused,
/// not cut: a cut could end inside a task id.
pub(super) fn read_from(from: &Path) -> Result<(String, String), Failure> {
    use std::io::Read;
    const MAX: u64 = 1024 * 1024;
    let mut bytes = Vec::new();
    let (result, shown) = if from.as_os_str() == "-" {
        (
            std::io::stdin().take(MAX + 1).read_to_end(&mut bytes),
            "- (standard input)".to_owned(),
        )
    } else {
        let shown = format!("{:?}", from.display().to_string());
        (
            std::fs::File::open(from).and_then(|f| f.take(MAX + 1).read_to_end(&mut bytes)),
            shown,
        )
    };
    let refused = |why: String| Failure::new(Exit::Usage, format!("--from {shown}: {why}"));
    result.map_err(|e| refused(e.to_string()))?;
    if bytes.len() as u64 > MAX {
        return Err(refused(
            "longer than 1 MiB; give atc the part with the [TASK_ID: …] lines (or the task ids as arguments)".to_owned(),
        ));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        refused("is not UTF-8 text; give atc the text submit_to_agent printed".to_owned())
    })?;
    Ok((text, shown))
}
