//! Cutting text to size, in one place: by characters (Unicode scalar values, as Python
//! counts them) for what QwenPaw receives, by terminal columns for what a person reads;
//! never inside a UTF-8 sequence. And a value as one shell word (`shell_word`), for the
//! commands atc prints or writes.

/// `1 job`, `2 jobs`: a count with the word that fits it.
pub fn plural(n: impl Into<u64>, one: &str, many: &str) -> String {
    let n = n.into();
    format!("{n} {}", if n == 1 { one } else { many })
}

/// At most this many characters of a refused value are shown.
const PREVIEW: usize = 40;

/// A short, escaped preview of `value` for an error message: at most 40 characters,
/// control characters escaped, and the length when it was cut. (A refused value may be
/// 100 KB long, or hold a password.)
pub fn preview(value: &str) -> String {
    let n = value.chars().count();
    let head: String = value.chars().take(PREVIEW).collect();
    if n > PREVIEW {
        format!("\"{}…\" ({n} characters)", head.escape_debug())
    } else {
        format!("\"{}\"", head.escape_debug())
    }
}

/// Keeps the first `max` characters. No marker is added (a delivery is cut exactly as
/// QwenPaw's `[:8000]` cuts it).
pub fn truncate_chars(mut text: String, max: usize) -> String {
    if let Some((cut, _)) = text.char_indices().nth(max) {
        text.truncate(cut);
    }
    text
}

/// One line of at most `max` characters: control characters (newlines included) become
/// spaces, surrounding whitespace goes. For server answers quoted in errors and notes.
pub fn one_line(text: &str, max: usize) -> String {
    let flat: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate_chars(flat.trim().to_owned(), max)
}

/// `text` as it may be shown on a terminal: control characters other than newline and
/// tab (escape sequences that retitle, recolour or rewrite the screen), C1 controls, and
/// the Unicode controls that reorder or hide text (bidi overrides, zero-width marks) are
/// shown escaped, as `\x1b` or `\u{202e}`, the way `git` and `fd` show odd file names.
/// Text that has none comes back borrowed.
pub fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\n' && c != '\t')
            || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}')
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if !unsafe_char(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Cuts `text` to `width` terminal columns ([`columns`]), ending in `…` when anything was
/// cut.
pub fn fit(text: &str, width: usize) -> String {
    if columns(text) <= width {
        return text.to_owned();
    }
    // Whole characters up to one column short of `width`, then the ellipsis.
    let room = width.saturating_sub(1);
    let mut used = 0;
    let mut cut = String::new();
    for c in text.chars() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > room {
            break;
        }
        used += w;
        cut.push(c);
    }
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
}

/// The terminal columns `text` takes: two for a CJK character or an emoji, none for a
/// combining mark. Tables pad and cut by it, so a session id in Chinese lines up.
pub fn columns(text: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(text)
}

/// `text` padded with spaces to `width` columns (as `{:<width$}` pads to characters).
pub fn pad(text: &str, width: usize) -> String {
    let mut out = text.to_owned();
    out.extend(std::iter::repeat_n(
        ' ',
        width.saturating_sub(columns(text)),
    ));
    out
}

/// `value` as one `sh` word: as it is when it holds only characters no shell treats
/// specially, else in single quotes (a `'` inside as `'\''`). For commands atc prints for
/// a person to paste, or writes into a crontab.
pub fn shell_word(value: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_.:@/+=,%".contains(c);
    if !value.is_empty() && value.chars().all(plain) {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_counts_characters_not_bytes() {
        assert_eq!(truncate_chars("héllo".into(), 2), "hé");
        assert_eq!(truncate_chars("🙂🙂🙂".into(), 2), "🙂🙂");
        assert_eq!(truncate_chars("abc".into(), 8000), "abc");
        let long = "任".repeat(9000);
        let cut = truncate_chars(long, 8000);
        assert_eq!(cut.chars().count(), 8000);
        assert_eq!(cut.len(), 8000 * 3);
    }

    #[test]
    fn terminal_text_shows_escapes_instead_of_obeying_them() {
        assert_eq!(for_terminal("plain\ttext\nline"), "plain\ttext\nline");
        assert!(matches!(for_terminal("ok"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(
            for_terminal("\u{1b}]0;pwned\u{7}\u{1b}[31mred\r"),
            "\\x1b]0;pwned\\x07\\x1b[31mred\\x0d"
        );
        assert_eq!(for_terminal("a\u{202e}b\u{9b}c"), "a\\u{202e}b\\x9bc");
    }

    #[test]
    fn a_preview_is_forty_characters_and_says_when_it_was_cut() {
        let forty = "é".repeat(40);
        assert_eq!(preview(&forty), format!("\"{forty}\""));
        assert_eq!(
            preview(&format!("{forty}x\n")),
            format!("\"{forty}…\" (42 characters)")
        );
        assert_eq!(preview("a\u{1b}b"), "\"a\\u{1b}b\"");
    }

    #[test]
    fn fit_marks_a_cut() {
        assert_eq!(fit("connection refused", 30), "connection refused");
        assert_eq!(fit("connection refused", 11), "connection…");
        assert_eq!(fit("héllo wörld", 7), "héllo…");
        assert_eq!(fit("abc", 0), "…");
        // By columns: a CJK character takes two.
        assert_eq!(fit("会话-1", 6), "会话-1");
        assert_eq!(fit("会话-1", 5), "会话…");
        assert_eq!(fit("会话会话", 6), "会话…");
        assert_eq!(fit("会话会话", 4), "会…");
        assert_eq!(pad("会话", 6), "会话  ");
        assert_eq!(pad("ab", 1), "ab");
        assert_eq!(columns("default → 会话-1"), 16);
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("  a\nb\u{1b}c  ", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc");
    }

    #[test]
    fn shell_word_quotes_only_what_a_shell_would_read_otherwise() {
        for (value, word) in [
            ("task-1", "task-1"),
            ("me:to:w:1:ab", "me:to:w:1:ab"),
            ("1h 30m", "'1h 30m'"),
            ("lena's", r"'lena'\''s'"),
            ("$HOME", "'$HOME'"),
            ("a;b", "'a;b'"),
            ("", "''"),
        ] {
            assert_eq!(shell_word(value), word, "{value:?}");
        }
    }
}
