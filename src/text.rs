//! Cutting text to size, in one place: by characters (Unicode scalar values, as Python
//! counts them), never inside a UTF-8 sequence.

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

/// Cuts `text` to `width` characters, ending in `…` when anything was cut.
pub fn fit(text: &str, width: usize) -> String {
    if text.chars().count() <= width {
        return text.to_owned();
    }
    let mut cut = truncate_chars(text.to_owned(), width.saturating_sub(1));
    cut.truncate(cut.trim_end().len());
    cut.push('…');
    cut
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
    fn fit_marks_a_cut() {
        assert_eq!(fit("connection refused", 30), "connection refused");
        assert_eq!(fit("connection refused", 11), "connection…");
        assert_eq!(fit("héllo wörld", 7), "héllo…");
        assert_eq!(fit("abc", 0), "…");
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("  a\nb\u{1b}c  ", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc");
    }
}
