//! The terminal, when stdout or stderr is one: how wide it is, and whether text must be
//! shown escaped. Piped output is never fitted or escaped, so scripts see the exact text
//! whatever window ran them.

use std::io::IsTerminal;

/// Whether stdout is a terminal (text from the server is then shown escaped).
pub fn stdout_is_terminal() -> bool {
    std::io::stdout().is_terminal()
}

/// Whether stderr is a terminal.
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// Whether nobody can read stderr: it is `/dev/null` (atc's QwenPaw plugin starts its
/// cadence's ticks so), or not open at all. A pipe, a file, the journal's socket, a
/// terminal: somebody may read it.
pub fn stderr_discarded() -> bool {
    #[cfg(unix)]
    {
        use std::os::fd::AsFd;
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        let Ok(fd) = std::io::stderr().as_fd().try_clone_to_owned() else {
            return true;
        };
        let Ok(meta) = std::fs::File::from(fd).metadata() else {
            return true;
        };
        meta.file_type().is_char_device()
            && std::fs::metadata("/dev/null").is_ok_and(|null| null.rdev() == meta.rdev())
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Writes one line for people to stderr (a warning, a `-v` line, an error). On a
/// terminal, control characters in it (text from the server) are shown escaped.
pub fn say(line: &str) {
    try_say(line);
}

/// [`say`], telling whether the line was written: a stderr that cannot take it (a full
/// disk, a closed pipe) is no reason to stop, but a give-up line it lost is said again.
pub fn try_say(line: &str) -> bool {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let written = if stderr_is_terminal() {
        writeln!(err, "{}", crate::text::for_terminal(line))
    } else {
        writeln!(err, "{line}")
    };
    written.and_then(|()| err.flush()).is_ok()
}

/// The width of the terminal stdout writes to, or `None` when stdout is not a terminal.
/// `COLUMNS` wins when set (to a positive number); otherwise the terminal is asked.
pub fn stdout_width() -> Option<usize> {
    if !std::io::stdout().is_terminal() {
        return None;
    }
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
        .filter(|&c| c > 0)
        .or_else(window_columns)
        .or(Some(80))
}

#[cfg(any(target_os = "linux", target_os = "macos"))]
fn window_columns() -> Option<usize> {
    // struct winsize from <sys/ioctl.h>: rows, columns, x and y pixels.
    #[repr(C)]
    struct WinSize {
        rows: u16,
        cols: u16,
        x: u16,
        y: u16,
    }
    #[cfg(target_os = "linux")]
    const TIOCGWINSZ: std::ffi::c_ulong = 0x5413;
    #[cfg(target_os = "macos")]
    const TIOCGWINSZ: std::ffi::c_ulong = 0x4008_7468;
    unsafe extern "C" {
        fn ioctl(fd: std::ffi::c_int, request: std::ffi::c_ulong, ...) -> std::ffi::c_int;
    }
    let mut size = WinSize {
        rows: 0,
        cols: 0,
        x: 0,
        y: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` through the pointer, which points at
    // a live value of exactly that layout; fd 1 is only read.
    let ok = unsafe { ioctl(1, TIOCGWINSZ, &mut size as *mut WinSize) } == 0;
    (ok && size.cols > 0).then_some(usize::from(size.cols))
}

#[cfg(not(any(target_os = "linux", target_os = "macos")))]
fn window_columns() -> Option<usize> {
    None
}
