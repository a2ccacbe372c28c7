//! Resolved settings: flags > environment > QwenPaw's own configuration > defaults, as
//! plain structs. The only reader of the process environment (tokens included).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exit::{Exit, Failure};
use crate::job::Target;
use crate::lifecycle::Limits;

/// Where QwenPaw's `qwenpaw app` listens by default.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8088";

/// A source of environment variables and the home directory (the process, or a test's map).
pub trait Environment {
    fn var(&self, name: &str) -> Option<String>;
    fn home(&self) -> Option<PathBuf>;
}

/// The real process environment.
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    fn home(&self) -> Option<PathBuf> {
        directories::BaseDirs::new().map(|dirs| dirs.home_dir().to_path_buf())
    }
}

/// The job file: `--state`/`ATC_STATE`, else the platform state dir
/// (`~/.local/state/atc/jobs.json` on Linux; the local data dir where there is none).
pub fn state_path(flag: Option<PathBuf>) -> Result<PathBuf, Failure> {
    if let Some(path) = flag {
        if path.as_os_str().is_empty() || path.is_dir() {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "--state {:?} must name a file, not a directory",
                    path.display().to_string()
                ),
            ));
        }
        return Ok(path);
    }
    let dirs = directories::ProjectDirs::from("", "", "atc").ok_or_else(|| {
        Failure::new(
            Exit::StateUnwritable,
            "cannot find a home directory for the job file; pass --state FILE or set ATC_STATE",
        )
    })?;
    let dir = dirs.state_dir().unwrap_or_else(|| dirs.data_local_dir());
    Ok(dir.join("jobs.json"))
}

/// Which rule picked the base URL (shown by `-v`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BaseUrlSource {
    Flag,
    ManagedRuntime,
    QwenPawConfig(PathBuf),
    Default,
}

impl fmt::Display for BaseUrlSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaseUrlSource::Flag => f.write_str("--base-url / ATC_BASE_URL"),
            BaseUrlSource::ManagedRuntime => f.write_str("QWENPAW_RUNTIME_API_URL"),
            BaseUrlSource::QwenPawConfig(path) => write!(f, "last_api in {}", path.display()),
            BaseUrlSource::Default => f.write_str("the default"),
        }
    }
}

/// The QwenPaw API root new watches talk to, resolved as QwenPaw's own clients do:
/// explicit (`--base-url`, `ATC_BASE_URL`) > managed runtime (`QWENPAW_RUNTIME_API_URL`,
/// only with `QWENPAW_RUNTIME_ID` and `QWENPAW_RUNTIME_INTERNAL_TOKEN`) > `last_api` in the
/// working dir's `config.json` > `http://127.0.0.1:8088`. Always ends in `/api`.
pub fn base_url(
    flag: Option<&str>,
    env: &dyn Environment,
) -> Result<(String, BaseUrlSource), Failure> {
    if let Some(url) = flag.filter(|u| !u.trim().is_empty()) {
        return Ok((normalize_base_url(url)?, BaseUrlSource::Flag));
    }
    if let (Some(url), Some(_), Some(_)) = (
        env.var("QWENPAW_RUNTIME_API_URL"),
        env.var("QWENPAW_RUNTIME_ID"),
        env.var("QWENPAW_RUNTIME_INTERNAL_TOKEN"),
    ) {
        return Ok((normalize_base_url(&url)?, BaseUrlSource::ManagedRuntime));
    }
    if let Some(config) = qwenpaw_working_dir(env).map(|dir| dir.join("config.json"))
        && let Some(url) = last_api(&config)
    {
        return Ok((
            normalize_base_url(&url)?,
            BaseUrlSource::QwenPawConfig(config),
        ));
    }
    Ok((
        normalize_base_url(DEFAULT_BASE_URL)?,
        BaseUrlSource::Default,
    ))
}

/// `$QWENPAW_WORKING_DIR`, else `~/.copaw` if it exists (QwenPaw's former name), else
/// `~/.qwenpaw`.
fn qwenpaw_working_dir(env: &dyn Environment) -> Option<PathBuf> {
    if let Some(dir) = env.var("QWENPAW_WORKING_DIR") {
        return Some(PathBuf::from(dir));
    }
    let home = env.home()?;
    let legacy = home.join(".copaw");
    Some(if legacy.is_dir() {
        legacy
    } else {
        home.join(".qwenpaw")
    })
}

/// `"last_api": {"host": …, "port": …}` from QwenPaw's config.json, as a URL. A missing or
/// unreadable config is not an error: QwenPaw's resolver falls through the same way.
fn last_api(config: &Path) -> Option<String> {
    let text = std::fs::read_to_string(config).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let api = value.get("last_api")?;
    let host = api.get("host")?.as_str()?.trim();
    let port = api.get("port")?.as_u64()?;
    let host = match host {
        "" | "0.0.0.0" => "127.0.0.1",
        "::" => "::1",
        other => other,
    };
    Some(if host.contains(':') {
        format!("http://[{host}]:{port}")
    } else {
        format!("http://{host}:{port}")
    })
}

/// Trims, strips trailing `/`, appends `/api` unless present. Refuses what cannot be a
/// plain QwenPaw address: other schemes, credentials in the URL (they would end up in the
/// job file), queries and fragments.
pub fn normalize_base_url(raw: &str) -> Result<String, Failure> {
    let usage = |why: String| Failure::new(Exit::Usage, why);
    let url = raw.trim().trim_end_matches('/');
    let Some((scheme, rest)) = url.split_once("://") else {
        return Err(usage(format!(
            "base URL {raw:?} has no scheme; write it like http://127.0.0.1:8088"
        )));
    };
    let scheme = scheme.to_ascii_lowercase();
    if scheme != "http" && scheme != "https" {
        return Err(usage(format!(
            "base URL {raw:?} uses {scheme}://; only http:// and https:// are supported"
        )));
    }
    let authority = rest.split('/').next().unwrap_or_default();
    if authority.contains('@') {
        return Err(usage(
            "base URL contains a user name or password; remove it (tokens go in QWENPAW_RUNTIME_INTERNAL_TOKEN or ATC_BEARER_TOKEN, never in the URL or the job file)".to_owned(),
        ));
    }
    if authority.is_empty() || authority.starts_with(':') {
        return Err(usage(format!("base URL {raw:?} has no host")));
    }
    if rest.contains(['?', '#']) || rest.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(usage(format!(
            "base URL {raw:?} contains a query, fragment or whitespace; give only scheme, host, port and path"
        )));
    }
    let url = format!("{scheme}://{rest}");
    Ok(if url.ends_with("/api") {
        url
    } else {
        format!("{url}/api")
    })
}

/// Credentials, read from the environment when requests are made; never stored or printed.
#[derive(Clone, Default)]
pub struct Auth {
    pub runtime_token: Option<String>,
    pub bearer_token: Option<String>,
}

impl Auth {
    pub fn from_env(env: &dyn Environment) -> Auth {
        Auth {
            runtime_token: env.var("QWENPAW_RUNTIME_INTERNAL_TOKEN"),
            bearer_token: env.var("ATC_BEARER_TOKEN"),
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |t: &Option<String>| if t.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("Auth")
            .field("runtime_token", &set(&self.runtime_token))
            .field("bearer_token", &set(&self.bearer_token))
            .finish()
    }
}

/// Checks one part of a chat target. Values are kept exactly as given (QwenPaw matches the
/// triple byte for byte), but empty values and control characters are refused.
pub fn target_part(flag: &str, value: &str) -> Result<String, Failure> {
    if value.trim().is_empty() {
        return Err(Failure::new(
            Exit::Usage,
            format!("{flag} must not be empty"),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(Failure::new(
            Exit::Usage,
            format!("{flag} {value:?} contains a control character"),
        ));
    }
    Ok(value.to_owned())
}

/// Builds a chat target from the `watch` arguments.
pub fn target(
    session: &str,
    user: &str,
    channel: &str,
    agent: &str,
    target_agent: Option<&str>,
) -> Result<Target, Failure> {
    Ok(Target {
        session_id: target_part("--session", session)?,
        user_id: target_part("--user", user)?,
        channel: target_part("--channel", channel)?,
        agent_id: target_part("--agent", agent)?,
        target_agent: target_agent
            .map(|a| target_part("--target-agent", a))
            .transpose()?
            .filter(|a| a != agent),
    })
}

/// The tick's knobs, as given (defaults live in `cli`), plus the credentials.
pub fn tick(args: &crate::cli::TickArgs, env: &dyn Environment) -> Tick {
    Tick {
        limits: Limits {
            max_strikes: args.max_strikes,
            max_age: args.max_age,
            busy_retry: args.busy_retry,
            max_busy: args.max_busy,
            keep: args.keep,
        },
        concurrency: args.concurrency as usize,
        http_timeout: args.http_timeout,
        turn_timeout: args.turn_timeout,
        auth: Auth::from_env(env),
    }
}

/// Everything one tick needs besides the job file.
#[derive(Clone, Debug)]
pub struct Tick {
    pub limits: Limits,
    pub concurrency: usize,
    pub http_timeout: Duration,
    pub turn_timeout: Option<Duration>,
    pub auth: Auth,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct MapEnv(HashMap<&'static str, String>, Option<PathBuf>);

    impl Environment for MapEnv {
        fn var(&self, name: &str) -> Option<String> {
            self.0.get(name).cloned()
        }
        fn home(&self) -> Option<PathBuf> {
            self.1.clone()
        }
    }

    fn env(vars: &[(&'static str, &str)], home: Option<&Path>) -> MapEnv {
        MapEnv(
            vars.iter().map(|(k, v)| (*k, (*v).to_owned())).collect(),
            home.map(Path::to_path_buf),
        )
    }

    #[test]
    fn normalises_base_urls() {
        for (raw, want) in [
            ("http://127.0.0.1:8088", "http://127.0.0.1:8088/api"),
            (" http://h:1/ ", "http://h:1/api"),
            ("http://h:1/api/", "http://h:1/api"),
            ("HTTPS://h/prefix", "https://h/prefix/api"),
            ("http://[::1]:8088", "http://[::1]:8088/api"),
        ] {
            assert_eq!(normalize_base_url(raw).unwrap(), want);
        }
        for raw in [
            "ftp://h",
            "h:8088",
            "http://user:pw@h",
            "http://tok@h/api",
            "http://",
            "http://h/?x=1",
            "file:///etc",
        ] {
            assert_eq!(
                normalize_base_url(raw).unwrap_err().exit,
                Exit::Usage,
                "{raw}"
            );
        }
    }

    #[test]
    fn base_url_precedence() {
        let home = tempfile::tempdir().unwrap();
        let work = home.path().join(".qwenpaw");
        std::fs::create_dir_all(&work).unwrap();
        std::fs::write(
            work.join("config.json"),
            r#"{"last_api": {"host": "0.0.0.0", "port": 9001}}"#,
        )
        .unwrap();
        let managed = [
            ("QWENPAW_RUNTIME_API_URL", "http://runtime:7000"),
            ("QWENPAW_RUNTIME_ID", "r1"),
            ("QWENPAW_RUNTIME_INTERNAL_TOKEN", "secret"),
        ];

        let e = env(&managed, Some(home.path()));
        assert_eq!(
            base_url(Some("http://flag:1"), &e).unwrap().0,
            "http://flag:1/api"
        );
        assert_eq!(
            base_url(None, &e).unwrap(),
            (
                "http://runtime:7000/api".into(),
                BaseUrlSource::ManagedRuntime
            )
        );
        // The managed URL alone is not enough: QwenPaw also wants the id and the token.
        let e = env(&managed[..2], Some(home.path()));
        assert_eq!(base_url(None, &e).unwrap().0, "http://127.0.0.1:9001/api");
        let e = env(&[], Some(home.path()));
        assert_eq!(base_url(None, &e).unwrap().0, "http://127.0.0.1:9001/api");
        // ~/.copaw wins when it exists.
        std::fs::create_dir_all(home.path().join(".copaw")).unwrap();
        assert_eq!(
            base_url(None, &e).unwrap(),
            ("http://127.0.0.1:8088/api".into(), BaseUrlSource::Default)
        );
        let other = home.path().join("elsewhere");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(
            other.join("config.json"),
            r#"{"last_api": {"host": "127.0.0.2", "port": 9002}}"#,
        )
        .unwrap();
        let e = env(
            &[("QWENPAW_WORKING_DIR", other.to_str().unwrap())],
            Some(home.path()),
        );
        assert_eq!(base_url(None, &e).unwrap().0, "http://127.0.0.2:9002/api");
        let e = env(&[], None);
        assert_eq!(base_url(None, &e).unwrap().0, "http://127.0.0.1:8088/api");
    }

    #[test]
    fn auth_debug_never_shows_tokens() {
        let auth = Auth::from_env(&env(&[("QWENPAW_RUNTIME_INTERNAL_TOKEN", "s3cr3t")], None));
        let shown = format!("{auth:?}");
        assert!(!shown.contains("s3cr3t"));
        assert!(shown.contains("<set>"));
    }

    #[test]
    fn targets_keep_values_exactly_but_refuse_empty_ones() {
        let t = target("s 77", "alice", "console", "default", Some("SE")).unwrap();
        assert_eq!(
            (t.session_id.as_str(), t.target_agent.as_deref()),
            ("s 77", Some("SE"))
        );
        assert_eq!(
            target("s", "u", "c", "default", Some("default"))
                .unwrap()
                .target_agent,
            None
        );
        assert!(target(" ", "u", "c", "a", None).is_err());
        assert!(target("s\n", "u", "c", "a", None).is_err());
    }
}
