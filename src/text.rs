//! Text from the model or the repository on its way into a commit message or to a terminal.
//! Pure. A file name may hold a newline (and so a line that passes for a trailer), a model's
//! text an escape sequence that moves the cursor or rewrites the title: neither reaches git or
//! the terminal as it is.

use std::fmt::Write;

/// `text` as one line, every control character written out (`\n`, `\e`, `\x7f`, `\u{9b}`)
/// Cuts `text` to at most `max` characters, ending in `...` when cut.
pub fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let kept: String = text.chars().take(max.saturating_sub(3)).collect();
    format!("{}...", kept.trim_end())
}

/// `1 turn`, `2 turns`: a count and its noun, plural where the count is not one.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    match n {
        1 => format!("1 {noun}"),
        _ => format!("{n} {noun}s"),
    }
}

/// and runs of spaces kept: for a value inside a line of a report or a trailer.
pub fn one_line(text: &str) -> String {
    escape(text, false)
}

/// `text` as a terminal may show it: its lines and tabs stay, every other control character
/// (escape sequences, carriage returns, C1 controls) and the characters that reorder what is
/// shown (bidirectional overrides) are written out.
pub fn for_terminal(text: &str) -> String {
    escape(text, true)
}

fn escape(text: &str, keep_lines: bool) -> String {
    if !text.chars().any(|c| needs_escape(c, keep_lines)) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if !needs_escape(c, keep_lines) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\0' => out.push_str("\\0"),
            '\u{1b}' => out.push_str("\\e"),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    out
}

fn needs_escape(c: char, keep_lines: bool) -> bool {
    if keep_lines && (c == '\n' || c == '\t') {
        return false;
    }
    c.is_control() || is_reordering(c)
}

/// The bidirectional marks, embeddings, overrides and isolates, the line and paragraph
/// separators, and the invisible ones (zero-width spaces and joiners, word joiners, the
/// byte-order mark): they change what a line looks like, or hide in it, without being seen.
fn is_reordering(c: char) -> bool {
    matches!(
        c,
        '\u{061c}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_count_of_one_is_singular() {
        assert_eq!(count(1u32, "turn"), "1 turn");
        assert_eq!(count(0u32, "turn"), "0 turns");
        assert_eq!(count(12u64, "file"), "12 files");
    }

    #[test]
    fn a_value_is_one_line_and_shows_what_it_hid() {
        assert_eq!(
            one_line("notes\nAgent-Outcome: passed\nx.txt"),
            "notes\\nAgent-Outcome: passed\\nx.txt"
        );
        assert_eq!(one_line("a\u{1b}[2Jb\r\0\u{7f}"), "a\\e[2Jb\\r\\0\\x7f");
        assert_eq!(one_line("tab\there  two"), "tab\\there  two");
        assert_eq!(
            one_line("\u{9b}31m \u{202e}txt.exe"),
            "\\u{9b}31m \\u{202e}txt.exe"
        );
        assert_eq!(one_line("calc.py ünïcode"), "calc.py ünïcode");
        assert_eq!(
            one_line("a\u{200b}b\u{200f}c\u{feff}"),
            "a\\u{200b}b\\u{200f}c\\u{feff}"
        );
    }

    #[test]
    fn the_terminal_keeps_lines_and_tabs_and_nothing_else() {
        assert_eq!(
            for_terminal("line 1\n\tline 2\u{1b}]0;title\u{7}\r"),
            "line 1\n\tline 2\\e]0;title\\x07\\r"
        );
    }
}
