//! Credentials, and where they may travel.

use std::fmt;

use super::Setting;
use super::env::Environment;
use crate::exit::{Exit, Failure};

/// Credentials, read from the environment; never stored or printed.
#[derive(Clone, Default)]
pub struct Auth {
    pub runtime_token: Option<String>,
    pub bearer_token: Option<String>,
    /// `--allow-insecure-remote`: tokens may go over plain http to another machine.
    pub allow_insecure_remote: bool,
}

impl Auth {
    /// The tokens in the environment. A malformed one (a control character, a space,
    /// non-ASCII) is refused (exit 2) naming the variable, never shown: sent as it is,
    /// it would fail every request as if the server were down.
    pub fn from_env(env: &dyn Environment) -> Result<Auth, Failure> {
        let token = |name: &str| match env.var(name) {
            Some(value) => crate::validate::token(&value)
                .map(|()| Some(value))
                .map_err(|why| Failure::new(Exit::Usage, format!("{name} {why}"))),
            None => Ok(None),
        };
        Ok(Auth {
            runtime_token: token("QWENPAW_RUNTIME_INTERNAL_TOKEN")?,
            bearer_token: token("ATC_BEARER_TOKEN")?,
            allow_insecure_remote: false,
        })
    }

    pub fn has_token(&self) -> bool {
        self.runtime_token.is_some() || self.bearer_token.is_some()
    }

    /// Refuses (exit 2) a base URL the tokens must not travel to, unless allowed.
    pub(super) fn check_transport(&self, base_url: &Setting<String>) -> Result<(), Failure> {
        if !self.has_token() || self.allow_insecure_remote {
            return Ok(());
        }
        match insecure_remote_host(&base_url.value) {
            Some(host) => Err(Failure::new(
                Exit::Usage,
                format!(
                    "{} {}: {}",
                    base_url.source,
                    base_url.value,
                    insecure_refusal(host)
                ),
            )),
            None => Ok(()),
        }
    }
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let set = |t: &Option<String>| if t.is_some() { "<set>" } else { "<unset>" };
        f.debug_struct("Auth")
            .field("runtime_token", &set(&self.runtime_token))
            .field("bearer_token", &set(&self.bearer_token))
            .field("allow_insecure_remote", &self.allow_insecure_remote)
            .finish()
    }
}

/// The host of `url` when it is plain `http://` to a host that is not this machine (an
/// address in 127.0.0.0/8 or `::1`, or a name that resolves only to such addresses:
/// `qwenpaw::loopback`). Tokens never go there unless allowed.
pub fn insecure_remote_host(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://").or_else(|| {
        url.get(..7)
            .filter(|p| p.eq_ignore_ascii_case("http://"))
            .map(|_| &url[7..])
    })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => authority.rsplit_once(':').map_or(authority, |(h, _)| h),
    };
    (!crate::qwenpaw::loopback::is_loopback(&host.to_ascii_lowercase())).then_some(host)
}

/// Why a token will not go to `host`, and what to do.
pub fn insecure_refusal(host: &str) -> String {
    format!(
        "refusing to send the token (QWENPAW_RUNTIME_INTERNAL_TOKEN / ATC_BEARER_TOKEN) over plain http:// to {host}, which is not this machine: use https://, or pass --allow-insecure-remote on a network you trust"
    )
}
