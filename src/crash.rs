//! Named points where a test build dies on purpose, to prove that a crash anywhere loses
//! and doubles nothing. Built only with `--features crash-points`; then
//! `ATC_CRASH_AT=<point>` (or `<point>#<n>`, the n-th time it is reached) makes the process
//! `abort()` there, as a `kill -9` or a power cut would stop it. In normal builds
//! [`point`] is empty and the variable is ignored.
//!
//! The points: `polled` (polls answered, nothing saved), `claimed` (the write-ahead
//! record saved, the POST not sent), `posted` (the POST answered, its outcome not
//! saved), `read-back` (the parent chat read back, nothing saved) and
//! `save-before-rename` (a save's temp file written and synced, not renamed).

/// Dies here if this test build was told to.
#[inline]
pub fn point(name: &str) {
    #[cfg(feature = "crash-points")]
    armed::check(name);
    #[cfg(not(feature = "crash-points"))]
    let _ = name;
}

#[cfg(feature = "crash-points")]
mod armed {
    use std::sync::Mutex;

    static HITS: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());

    pub fn check(name: &str) {
        let Some(wanted) = std::env::var_os("ATC_CRASH_AT") else {
            return;
        };
        let wanted = wanted.to_string_lossy();
        let (point, nth) = match wanted.split_once('#') {
            Some((point, n)) => (point, n.parse().unwrap_or(1)),
            None => (&*wanted, 1),
        };
        if point != name {
            return;
        }
        let mut hits = HITS.lock().unwrap_or_else(|e| e.into_inner());
        let count = match hits.iter_mut().find(|(n, _)| n == name) {
            Some((_, count)) => {
                *count += 1;
                *count
            }
            None => {
                hits.push((name.to_owned(), 1));
                1
            }
        };
        if count == nth {
            std::process::abort();
        }
    }
}
