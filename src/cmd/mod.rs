//! One thin module per command: load or update the job file, hand decisions to
//! `lifecycle`, say what happened. No decisions here.

pub mod cancel;
pub mod config;
pub mod doctor;
pub mod import;
pub mod log;
pub mod parent_read;
pub mod paths;
pub mod qwenpaw;
pub mod qwenpaw_replace;
pub mod redeliver;
pub mod status;
pub mod tick;
pub mod timer;
pub mod wait;
pub mod watch;

/// Writes `text` for people to stdout. On a terminal, control characters and escape
/// sequences in it (text from the server: a child's answer, an error detail) are shown
/// escaped instead of acted on; piped, the text is exact. Unlike `print!`, a closed pipe
/// (`atc status | head -1`) is an error the caller returns, not a panic; `main` ends
/// quietly on it.
pub fn emit(text: &str) -> anyhow::Result<()> {
    if crate::term::stdout_is_terminal() {
        write_stdout(&crate::text::for_terminal(text))
    } else {
        write_stdout(text)
    }
}

fn write_stdout(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// What a command that changed one job prints: the record with `--json`, else `message`
/// (nothing with `-q`).
pub fn report_job(
    job: &crate::job::Job,
    message: &str,
    out: crate::settings::Output,
) -> anyhow::Result<()> {
    if out.json {
        print_json(job)
    } else if out.quiet {
        Ok(())
    } else {
        emit(&format!("{message}\n"))
    }
}

/// What a command of several task ids did to each: one id, its job as [`report_job`]
/// prints it; several, `{"jobs": […]}` in JSON (as `watch` prints them) or one message a
/// line. Nothing when none was done (the errors say it).
pub fn report_jobs<'a>(
    done: impl IntoIterator<Item = (&'a crate::job::Job, &'a str)>,
    asked: usize,
    out: crate::settings::Output,
) -> anyhow::Result<()> {
    let done: Vec<_> = done.into_iter().collect();
    match done.as_slice() {
        [] => Ok(()),
        [(job, message)] if asked == 1 => report_job(job, message, out),
        _ if out.json => {
            let jobs: Vec<_> = done.iter().map(|(job, _)| job).collect();
            print_json(&serde_json::json!({ "jobs": jobs }))
        }
        _ if out.quiet => Ok(()),
        _ => done
            .iter()
            .try_for_each(|(_, message)| emit(&format!("{message}\n"))),
    }
}

/// What a job file other than the one in use still watches (a tick still has something
/// to do for each task): how many, and the words naming them, "FILE still watches 2 tasks
/// (task-a, task-b)". `None` for a file that is not there, cannot be read, or watches
/// nothing. Read, never written or created (`config` and `doctor` ask before a move).
pub fn still_watching(path: &std::path::Path) -> Option<(usize, String)> {
    let live = crate::state::Store::new(path.to_path_buf())
        .peek(|file| {
            let turns = crate::lifecycle::Turns::of(&file.turns);
            file.jobs
                .iter()
                .filter(|job| !crate::lifecycle::settled_job(job, &turns))
                .map(|job| job.task_id.clone())
                .collect::<Vec<_>>()
        })
        .ok()
        .filter(|live| !live.is_empty())?;
    Some((
        live.len(),
        format!(
            "{} still watches {} ({}{})",
            path.display(),
            crate::text::plural(live.len() as u64, "task", "tasks"),
            live.iter().take(3).cloned().collect::<Vec<_>>().join(", "),
            if live.len() > 3 { ", …" } else { "" }
        ),
    ))
}

/// Refuses `task_id` when the job file of `store` (chosen by `source`) does not watch it
/// and another job file a tick here might read does (a shell's `ATC_STATE` beside the
/// default file atc's QwenPaw plugin ticks): names that file, where "no watch for" would
/// send a person looking for a mistyped id. Read, never written or created; otherwise
/// nothing. The command's own `store` is asked, so its later read or update does not
/// parse the file again.
pub fn watched_elsewhere(
    task_id: &str,
    store: &crate::state::Store,
    source: &crate::settings::Source,
    others: &[std::path::PathBuf],
) -> anyhow::Result<()> {
    let has = |store: &crate::state::Store| store.peek(|file| file.find(task_id).is_some());
    // Watched here, or this file cannot be read: the command says what it finds.
    if has(store).unwrap_or(true) {
        return Ok(());
    }
    if let Some(other) = others
        .iter()
        .find(|path| has(&crate::state::Store::new(path.to_path_buf())).unwrap_or(false))
    {
        crate::fail!(
            crate::exit::Exit::Refused,
            "no watch for {task_id} in {} (from {source}), but {} watches it: pass --state {} to this command",
            store.path().display(),
            other.display(),
            other.display()
        );
    }
    Ok(())
}

/// Says each line of the config file a command read past (`status`, `config show`): a
/// warning, since every tick refuses the file until it is fixed.
pub fn warn_config_skipped(lines: &[String], out: crate::settings::Output) {
    if out.quiet {
        return;
    }
    for line in lines {
        crate::term::say(&format!(
            "atc: warning: {line}. Every atc tick refuses that file until it is fixed: nothing is polled or posted meanwhile"
        ));
    }
}

/// Prints a value (a job record as it is in the file, a report) as one JSON document.
pub fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    // Exact: JSON escapes control characters itself, and scripts want the real text.
    write_stdout(&format!("{}\n", serde_json::to_string_pretty(value)?))
}

/// The base URL the job file's watches of `task_ids` recorded, when there is one for all
/// of them (read, never written or created): what [`crate::settings::base_for_watched`]
/// prefers to a base URL nobody named.
pub fn recorded_base(
    store: &crate::state::Store,
    task_ids: &[String],
) -> Option<(String, crate::settings::Source)> {
    store
        .peek(|file| {
            let mut bases = task_ids
                .iter()
                .map(|task| file.find(task).map(|job| job.base_url.clone()));
            let first = bases.next()??;
            bases
                .all(|base| base.as_deref() == Some(first.as_str()))
                .then(|| {
                    let source = crate::settings::Source::Watched {
                        task_id: task_ids[0].clone(),
                        file: store.path().to_path_buf(),
                    };
                    (first, source)
                })
        })
        .ok()
        .flatten()
}
