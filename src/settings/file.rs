//! The config file, `$XDG_CONFIG_HOME/atc/config.toml` (`~/.config/atc/config.toml`; the
//! file `ATC_CONFIG` names): flat `key = value` lines, the keys of [`super::keys::KEYS`].
//! Read by every command, so the timer's ticks, the plugin's kicks and a person's
//! commands work with the same settings; below the flags and the environment.
//!
//! A file that cannot be used is refused whole ([`Exit::Config`], naming the file, the key
//! and what to do): an unknown key (a typo), a value of the wrong type or out of range, a
//! file others can write. Nothing in it is ever silently ignored.
//!
//! `atc config set` and `unset` edit it with `toml_edit`, which keeps the rest of the file
//! as it was, comments and order included; the `toml` crate, which reads it, cannot write
//! a document back with its comments.

use std::io;
use std::path::{Path, PathBuf};

use super::env::Environment;
use super::keys::{self, Key, Kind, Value};
use super::{Setting, Source};
use crate::exit::{Exit, Failure};

/// `ATC_CONFIG` names the config file; else it is `config.toml` in atc's config directory.
pub const ATC_CONFIG: &str = "ATC_CONFIG";

/// The config file: where it is, how that was decided, and what it holds.
#[derive(Clone, Debug, Default)]
pub struct ConfigFile {
    /// None only without a home directory and without `XDG_CONFIG_HOME` or `ATC_CONFIG`.
    pub path: Option<PathBuf>,
    /// `ATC_CONFIG`, `XDG_CONFIG_HOME`, or the default (`~/.config`).
    pub located: Option<Source>,
    pub exists: bool,
    values: Vec<(&'static Key, Value)>,
    /// What a lenient load ([`load_for_watch`], [`load_for_show`]) left out, one line
    /// each: keys whose value (or name) is wrong.
    pub skipped: Vec<String>,
    /// The names of the keys `skipped` left out, in its order.
    skipped_keys: Vec<String>,
}

impl ConfigFile {
    /// The value the file gives `key`, with its source.
    pub fn get(&self, name: &str) -> Option<Setting<Value>> {
        let path = self.path.as_ref()?;
        self.values
            .iter()
            .find(|(key, _)| key.name == name)
            .map(|(key, value)| Setting {
                value: value.clone(),
                source: Source::File {
                    path: path.clone(),
                    key: key.name,
                },
            })
    }

    /// Why the file's line for `name` was left out, if a lenient load left it out.
    pub fn skipped_line(&self, name: &str) -> Option<&str> {
        let at = self.skipped_keys.iter().position(|key| key == name)?;
        Some(&self.skipped[at])
    }

    /// The keys the file sets, with their values, in the order of `KEYS`.
    pub fn values(&self) -> impl Iterator<Item = (&'static str, &Value)> {
        self.values.iter().map(|(key, value)| (key.name, value))
    }
}

/// Where the config file is for `env`: `ATC_CONFIG`, else `$XDG_CONFIG_HOME/atc/config.toml`
/// (an absolute `XDG_CONFIG_HOME` only, as the XDG spec says), else
/// `~/.config/atc/config.toml` (on macOS too, beside `~/.config/atc/env`).
pub fn locate(env: &dyn Environment) -> Option<(PathBuf, Source)> {
    if let Some(path) = env.path(ATC_CONFIG) {
        // Absolute, so that a unit that names it (`timer print`) finds the same file.
        let path = std::path::absolute(&path).unwrap_or(path);
        return Some((path, Source::Env(ATC_CONFIG)));
    }
    if let Some(dir) = env.path("XDG_CONFIG_HOME").filter(|d| d.is_absolute()) {
        return Some((
            dir.join("atc").join("config.toml"),
            Source::Env("XDG_CONFIG_HOME"),
        ));
    }
    let home = env.home()?;
    Some((home.join(".config/atc/config.toml"), Source::Default))
}

/// Reads and checks the config file. A missing file is an empty one, unless `ATC_CONFIG`
/// names it and `named_must_exist` (every command but `atc config`): a file named on
/// purpose that is not there is a mistake to say, not a default to fall back to.
pub fn load(env: &dyn Environment, named_must_exist: bool) -> Result<ConfigFile, Failure> {
    load_as(env, named_must_exist, Lenient::No)
}

/// [`load`] for `atc watch`: recording a watch must not depend on the tick's knobs, so a
/// wrong key or value other than what a watch reads (`state`, `base-url`, `auto-watch`)
/// is left out and named in `skipped` (every tick still refuses the file until it is
/// fixed). A file that is not TOML is refused: which job file it names is unknown.
pub fn load_for_watch(env: &dyn Environment) -> Result<ConfigFile, Failure> {
    load_as(env, true, Lenient::ButWatchKeys)
}

/// [`load`] for `atc config show` and `get`, which show a file every tick refuses: any
/// wrong key or value is left out and named in `skipped`. A file that is not TOML, or
/// cannot be read or trusted, is refused: none of its lines can be told.
pub fn load_for_show(env: &dyn Environment) -> Result<ConfigFile, Failure> {
    load_as(env, false, Lenient::Yes)
}

/// The keys a watch reads from the config file.
const WATCH_KEYS: [&str; 3] = ["state", "base-url", "auto-watch"];

/// Which wrong lines a load leaves out (and names) instead of refusing the file.
#[derive(Clone, Copy, PartialEq)]
enum Lenient {
    No,
    /// All but the keys a watch reads.
    ButWatchKeys,
    Yes,
}

fn load_as(
    env: &dyn Environment,
    named_must_exist: bool,
    lenient: Lenient,
) -> Result<ConfigFile, Failure> {
    let Some((path, located)) = locate(env) else {
        return Ok(ConfigFile::default());
    };
    let text = match read(&path) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == io::ErrorKind::NotFound => {
            if named_must_exist && located == Source::Env(ATC_CONFIG) {
                return Err(refusal(
                    &path,
                    format!(
                        "does not exist, and {ATC_CONFIG} names it: create it (`atc config set KEY VALUE` does) or unset {ATC_CONFIG}"
                    ),
                ));
            }
            None
        }
        Err(err) => return Err(refusal(&path, unreadable(&err))),
    };
    let (values, skipped) = match &text {
        Some(text) => check(&path, text, env.home().as_deref(), lenient)?,
        None => (Vec::new(), Vec::new()),
    };
    let (skipped_keys, skipped) = skipped.into_iter().unzip();
    Ok(ConfigFile {
        exists: text.is_some(),
        path: Some(path),
        located: Some(located),
        values,
        skipped,
        skipped_keys,
    })
}

fn unreadable(err: &io::Error) -> String {
    if let Some(untrusted) = err.get_ref().and_then(|e| e.downcast_ref::<Untrusted>()) {
        return untrusted.to_string();
    }
    match err.kind() {
        io::ErrorKind::IsADirectory => "is a directory: name a file".to_owned(),
        io::ErrorKind::InvalidData => {
            "is not UTF-8 text: a config file is TOML (key = value lines)".to_owned()
        }
        _ => format!("cannot be read: {err}; {}", advice(err)),
    }
}

/// The file's text, after checking that nobody but its owner (this user, or root) can
/// change it: whoever can write it decides where tokens go (`base-url`) and which job file
/// every tick uses.
fn read(path: &Path) -> io::Result<String> {
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(io::ErrorKind::IsADirectory.into());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = crate::state::guard::euid();
        if meta.uid() != me && meta.uid() != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                Untrusted(format!(
                    "is owned by uid {}, not by you (uid {me}): its owner decides where your tokens go; use a config file of your own",
                    meta.uid()
                )),
            ));
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                Untrusted(format!(
                    "is writable by others (mode {mode:o}): whoever can write it decides where your tokens go; `chmod 600 {}`",
                    path.display()
                )),
            ));
        }
    }
    std::fs::read_to_string(path)
}

/// A refusal of a file someone else could have written (its message is the whole story).
#[derive(Debug)]
struct Untrusted(String);

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Untrusted {}

fn refusal(path: &Path, why: String) -> Failure {
    Failure::new(
        Exit::Config,
        format!("config file {}: {why}", path.display()),
    )
}

/// A file's valid keys with their values, and (leniently loaded) the lines left out: each
/// one's key and why.
type Checked = (Vec<(&'static Key, Value)>, Vec<(String, String)>);

/// The file's text, parsed and checked: every key known, every value valid.
fn check(
    path: &Path,
    text: &str,
    home: Option<&Path>,
    lenient: Lenient,
) -> Result<Checked, Failure> {
    let table: toml::Table = toml::from_str(text).map_err(|err| {
        let at = err
            .span()
            .map(|span| {
                let before = &text[..span.start.min(text.len())];
                let line = before.matches('\n').count() + 1;
                let column = before
                    .rsplit('\n')
                    .next()
                    .unwrap_or_default()
                    .chars()
                    .count()
                    + 1;
                // The key of that line, never its value (a token pasted by mistake stays
                // unprinted).
                let key = text
                    .lines()
                    .nth(line - 1)
                    .and_then(|l| l.split_once('='))
                    .map(|(key, _)| key.trim())
                    .filter(|key| !key.is_empty() && key.chars().count() <= 40)
                    .map(|key| format!(" (key {key})"))
                    .unwrap_or_default();
                format!("line {line}, column {column}{key}: ")
            })
            .unwrap_or_default();
        refusal(
            path,
            format!(
                "{at}{}: fix the file (TOML: one `key = value` per line, `max-age = \"3d\"`)",
                err.message().trim_end()
            ),
        )
    })?;
    let mut values = Vec::new();
    let mut skipped = Vec::new();
    for (name, raw) in &table {
        match check_key(path, name, raw, home) {
            Ok(value) => values.push(value),
            Err(problem)
                if lenient == Lenient::Yes
                    || (lenient == Lenient::ButWatchKeys
                        && !WATCH_KEYS.contains(&name.as_str())) =>
            {
                skipped.push((name.clone(), problem.message));
            }
            Err(problem) => return Err(problem),
        }
    }
    // In the order of KEYS, whatever the order of the file.
    values.sort_by_key(|(key, _)| keys::KEYS.iter().position(|k| k.name == key.name));
    Ok((values, skipped))
}

/// One `key = value` of the file, checked: known, and valid.
fn check_key(
    path: &Path,
    name: &str,
    raw: &toml::Value,
    home: Option<&Path>,
) -> Result<(&'static Key, Value), Failure> {
    {
        if let (None, toml::Value::Table(inner)) = (keys::key(name), raw) {
            let first = inner.keys().next().map_or("max-age", String::as_str);
            return Err(refusal(
                path,
                format!(
                    "[{}] is a table, and atc's config file has none: write its keys at the top of the file, before any [table] ({} = …)",
                    crate::text::preview(name).trim_matches('"'),
                    crate::text::preview(first).trim_matches('"'),
                ),
            ));
        }
        let key = keys::known(name).map_err(|why| {
            refusal(
                path,
                format!("{why}: fix the key or remove it (`atc config unset {name}`); `atc config show` lists the keys"),
            )
        })?;
        let value = key.kind.from_toml(raw, home).map_err(|why| {
            refusal(
                path,
                format!(
                    "{} = {}: {why}; fix it (`atc config set {} VALUE` checks a value before writing it)",
                    key.name,
                    shown(raw),
                    key.name
                ),
            )
        })?;
        Ok((key, value))
    }
}

/// A TOML value as written, cut short (never a whole long string).
fn shown(value: &toml::Value) -> String {
    match value {
        toml::Value::String(s) => crate::text::preview(s),
        toml::Value::Table(_) => "a table".to_owned(),
        toml::Value::Array(_) => "an array".to_owned(),
        other => other.to_string().chars().take(40).collect(),
    }
}

/// The first lines of a config file `atc config set` creates.
const HEADER: &str = "\
# atc's settings, read by every atc command: the timer's ticks, the kicks of atc's
# QwenPaw plugin and yours. A flag beats its environment variable (ATC_MAX_AGE), which
# beats this file. `atc config show` lists every key; tokens never go here.
";

/// What an edit did.
#[derive(Debug, PartialEq, Eq)]
pub enum Edited {
    Set,
    /// `unset` of a key the file did not hold: nothing was written.
    WasNotSet,
    Unset,
}

/// Sets `name` to `value` (None: removes it) in the file at `path`, keeping the rest of
/// the file as it is. Written atomically (a private temp file renamed over it), 0600, its
/// directory created 0700; through a symbolic link, the file it points to is replaced.
/// Whatever fails, the old file is left whole.
pub fn edit(path: &Path, name: &str, value: Option<&Value>) -> anyhow::Result<Edited> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            std::fs::canonicalize(path).map_err(|err| {
                refusal(
                    path,
                    format!("is a symbolic link that leads nowhere: {err}"),
                )
            })?
        }
        _ => path.to_path_buf(),
    };
    // Two edits at once (two `atc config set` of different keys) must not lose each
    // other's key: each reads, edits and writes under the file's lock.
    make_dir(&target)?;
    let _guard = crate::state::lock::exclusive(
        &crate::state::lock::sidecar(&target, "lock"),
        crate::state::store::LOCK_WAIT,
    )?;
    let old = match read(&target) {
        Ok(text) => Some(text),
        Err(err) if err.kind() == io::ErrorKind::NotFound => None,
        Err(err) => return Err(refusal(&target, unreadable(&err)).into()),
    };
    let mut doc: toml_edit::DocumentMut = match &old {
        Some(text) => text.parse().map_err(|err: toml_edit::TomlError| {
            refusal(
                &target,
                format!(
                    "is not valid TOML ({}): fix it by hand first; atc edits only a file it can read whole",
                    err.message().trim_end()
                ),
            )
        })?,
        None => HEADER.parse().expect("the header is TOML"),
    };
    let edited = match value {
        Some(value) => {
            let mut new = Kind::to_toml(value);
            match doc.get_mut(name).and_then(|item| item.as_value_mut()) {
                Some(old) => {
                    // The comment after the old value stays after the new one.
                    *new.decor_mut() = old.decor().clone();
                    *old = new;
                }
                None => {
                    // A file of comments only (the header of a new one): toml_edit holds
                    // them after the last key, so they become the new key's preamble.
                    let preamble = (doc.as_table().is_empty())
                        .then(|| doc.trailing().as_str().unwrap_or_default().to_owned());
                    doc.insert(name, toml_edit::Item::Value(new));
                    if let Some(preamble) = preamble {
                        doc.set_trailing("");
                        if let Some(mut key) = doc.as_table_mut().key_mut(name) {
                            key.leaf_decor_mut().set_prefix(preamble);
                        }
                    }
                }
            }
            Edited::Set
        }
        None => match doc.remove(name) {
            Some(_) => Edited::Unset,
            None => return Ok(Edited::WasNotSet),
        },
    };
    let text = doc.to_string();
    write(&target, text.as_bytes())?;
    Ok(edited)
}

/// The file at `path` checked as every command would read it (after an edit: is it whole?).
pub fn recheck(path: &Path, home: Option<&Path>) -> Result<(), Failure> {
    match read(path) {
        Ok(text) => check(path, &text, home, Lenient::No).map(drop),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(refusal(path, unreadable(&err))),
    }
}

fn write(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    crate::state::fsutil::write_atomic(path, bytes).map_err(|err| failed_write(path, &err))?;
    Ok(())
}

/// The config file's directory, created 0700 when missing.
fn make_dir(path: &Path) -> anyhow::Result<()> {
    let dir = crate::state::fsutil::parent_dir(path);
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|err| failed_write(path, &err))?;
    Ok(())
}

fn failed_write(path: &Path, err: &io::Error) -> Failure {
    Failure::new(
        Exit::Config,
        format!(
            "cannot write the config file {}: {err}; {} (the file is as it was)",
            path.display(),
            advice(err)
        ),
    )
}

/// What to do when the config file or its directory could not be read or written.
fn advice(err: &io::Error) -> &'static str {
    match err.kind() {
        io::ErrorKind::PermissionDenied | io::ErrorKind::ReadOnlyFilesystem => {
            "check the permissions of the file and its directory, or point ATC_CONFIG elsewhere"
        }
        io::ErrorKind::NotADirectory => {
            "a file is where a directory should be: point ATC_CONFIG elsewhere"
        }
        _ => crate::state::fsutil::advice(err),
    }
}

/// The config file's place only, its contents not read: for `atc config path`, `set` and
/// `unset`, which must work whatever the file holds.
pub fn located(env: &dyn Environment) -> ConfigFile {
    match locate(env) {
        Some((path, located)) => ConfigFile {
            exists: path.exists(),
            path: Some(path),
            located: Some(located),
            values: Vec::new(),
            skipped: Vec::new(),
            skipped_keys: Vec::new(),
        },
        None => ConfigFile::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What to do about a config file atc could not read or write, by what went wrong;
    /// the job file's advice for the rest.
    #[test]
    fn advice_names_the_fix_for_what_went_wrong() {
        let permissions =
            "check the permissions of the file and its directory, or point ATC_CONFIG elsewhere";
        for (kind, says) in [
            (io::ErrorKind::PermissionDenied, permissions),
            (io::ErrorKind::ReadOnlyFilesystem, permissions),
            (
                io::ErrorKind::NotADirectory,
                "a file is where a directory should be: point ATC_CONFIG elsewhere",
            ),
        ] {
            assert_eq!(advice(&kind.into()), says, "{kind:?}");
        }
        let full = io::Error::from(io::ErrorKind::StorageFull);
        assert_eq!(advice(&full), crate::state::fsutil::advice(&full));
        assert!(!advice(&full).is_empty());
    }
}
