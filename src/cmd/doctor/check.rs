//! One line of `atc doctor`: what was checked, whether it is fine, what was found, and what
//! to do when it is not.

pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
    pub fix: Option<String>,
}

/// A line that is fine.
pub fn ok(name: &'static str, detail: String) -> Check {
    Check {
        name,
        ok: true,
        detail,
        fix: None,
    }
}

/// A line that is not, and what to do.
pub fn bad(name: &'static str, detail: String, fix: String) -> Check {
    Check {
        name,
        ok: false,
        detail,
        fix: Some(fix),
    }
}
