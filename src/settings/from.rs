//! `--from`: the text that names the tasks to watch.

use std::path::Path;

use crate::exit::{Exit, Failure};

/// The text `--from` names: a file, or standard input for `-` (at most 1 MiB).
pub(super) fn read_from(from: &Path) -> Result<(String, String), Failure> {
    use std::io::Read;
    const MAX: u64 = 1024 * 1024;
    let mut text = String::new();
    let (result, shown) = if from.as_os_str() == "-" {
        (
            std::io::stdin().take(MAX).read_to_string(&mut text),
            "- (standard input)".to_owned(),
        )
    } else {
        let shown = format!("{:?}", from.display().to_string());
        (
            std::fs::File::open(from).and_then(|f| f.take(MAX).read_to_string(&mut text)),
            shown,
        )
    };
    result.map_err(|e| Failure::new(Exit::Usage, format!("--from {shown}: {e}")))?;
    Ok((text, shown))
}
