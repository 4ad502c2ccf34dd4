//! Text that a model, a provider or the relay wrote, made safe to print: every C0 and C1 control
//! character and DEL is shown in a visible form (`\r`, `\x1b`, `\u{9b}`), so nothing it contains
//! can move the cursor, erase a line, hide part of an approval prompt, set the clipboard (`ESC]52`)
//! or retitle the window. Unicode bidirectional overrides and line/paragraph separators are shown
//! escaped as well, since they reorder or break what the user reads.
//!
//! Two forms. `line` is for anything that must stay on one line (tool names, arguments, the
//! approval prompt, notes, errors): `\n` and `\t` are escaped too. `text` is for the model's answer
//! and reasoning, where a plain `\n` is how a model writes paragraphs and code and `\t` only moves
//! to the next tab stop, so those two stay; everything else is escaped, `\r` included (it would
//! return to the start of the line and let later text overwrite what was shown).
//! A backslash is left as it is: JSON arguments are full of `\"` and `\n` written as two
//! characters, and doubling them would make every prompt harder to read; an escaped form can only
//! look like text the model wrote, never act on the terminal.

/// `s` on one line, every control character in visible form.
pub fn line(s: &str) -> String {
    escape(s, false)
}

/// `s` with its plain line ends and tabs kept, every other control character in visible form.
pub fn text(s: &str) -> String {
    escape(s, true)
}

fn escape(s: &str, keep_layout: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\n' | '\t' if keep_layout => out.push(c),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\0'..='\x1f' | '\x7f' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            '\u{80}'..='\u{9f}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}' => out.push_str(&format!("\\u{{{:x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    out
}

/// `s` (already escaped to one line) cut into pieces of at most `width` characters, so a long
/// approval is shown whole across several lines instead of being cut.
pub fn wrap(s: &str, width: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    chars
        .chunks(width.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_c0_c1_and_del_is_visible() {
        assert_eq!(line("a\rb"), "a\\rb");
        assert_eq!(line("\x1b]52;c;aGk=\x07"), "\\x1b]52;c;aGk=\\x07");
        assert_eq!(line("\x1b[2Kx"), "\\x1b[2Kx");
        assert_eq!(line("\u{9b}2K"), "\\u{9b}2K");
        assert_eq!(line("\x7f\x00\x08"), "\\x7f\\x00\\x08");
        assert_eq!(line("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(line("\u{202e}txt"), "\\u{202e}txt");
        for c in (0u32..0x20).chain(0x7f..0xa0) {
            let c = char::from_u32(c).unwrap();
            let shown = line(&c.to_string());
            assert!(
                !shown.chars().any(char::is_control),
                "{c:?} shown as {shown:?}"
            );
        }
    }

    #[test]
    fn text_keeps_plain_line_ends_and_tabs_only() {
        assert_eq!(text("one\n\ttwo\r\nthree"), "one\n\ttwo\\r\nthree");
        assert_eq!(text("\x1b[31mred"), "\\x1b[31mred");
        assert_eq!(
            text("héllo ✓ \\n"),
            "héllo ✓ \\n",
            "printable text is untouched"
        );
    }

    #[test]
    fn wrapping_keeps_every_character() {
        let s = "x".repeat(250);
        let pieces = wrap(&s, 100);
        assert_eq!(
            pieces.iter().map(String::len).collect::<Vec<_>>(),
            [100, 100, 50]
        );
        assert_eq!(pieces.concat(), s);
        assert_eq!(wrap("", 10), [""]);
    }
}
