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

/// Whether standard error may carry colour and cursor movement: a terminal, and no `NO_COLOR`
/// (<https://no-color.org>: set and not empty).
pub fn styled() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Columns of the terminal on standard error; 160 when it is not one (a log keeps long lines).
/// Asked of `stty` on the controlling terminal each time, so a resized window is followed
/// (the workspace forbids the `unsafe` an ioctl would need, and rustix's termios feature would
/// rebuild the server crate for one number).
pub fn width() -> usize {
    use std::io::IsTerminal;
    if !std::io::stderr().is_terminal() {
        return 160;
    }
    let asked = std::fs::File::open("/dev/tty").ok().and_then(|tty| {
        let out = std::process::Command::new("stty")
            .arg("size")
            .stdin(tty)
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let text = String::from_utf8(out.stdout).ok()?;
        text.split_whitespace().nth(1)?.parse::<usize>().ok()
    });
    asked.filter(|w| *w >= 20).unwrap_or(80)
}

/// `s` (already escaped to one line) cut into pieces of at most `width` characters at spaces, so no
/// word is broken; a word longer than the width is cut. Each space that a cut falls on opens the
/// next piece, so the pieces put together are `s` again, and a terminal that drops trailing spaces
/// loses none.
pub fn wrap_words(s: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    let mut pieces = Vec::new();
    let mut cur: Vec<char> = Vec::new();
    for c in s.chars() {
        if cur.len() == width {
            // The cut goes before a whole run of spaces, so no piece ends in one (a terminal
            // would drop it): the last space that follows a non-space.
            match (1..cur.len())
                .rev()
                .find(|&i| cur[i] == ' ' && cur[i - 1] != ' ')
            {
                Some(i) => {
                    let rest = cur.split_off(i);
                    pieces.push(cur.iter().collect());
                    cur = rest;
                }
                None => {
                    // One long word: cut it, its trailing spaces (if any) opening the next piece.
                    let end = cur
                        .iter()
                        .rposition(|&x| x != ' ')
                        .map_or(cur.len(), |k| k + 1);
                    let rest = cur.split_off(end.max(1));
                    pieces.push(std::mem::replace(&mut cur, rest).iter().collect());
                }
            }
        }
        cur.push(c);
    }
    pieces.push(cur.iter().collect());
    pieces
}

/// SGR colours, written only when `on`.
#[derive(Clone, Copy)]
pub struct Paint {
    pub on: bool,
}

impl Paint {
    pub fn new() -> Self {
        Self { on: styled() }
    }

    pub fn paint(self, code: &str, s: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_owned()
        }
    }

    pub fn dim(self, s: &str) -> String {
        self.paint("2", s)
    }
    pub fn red(self, s: &str) -> String {
        self.paint("31", s)
    }
    pub fn green(self, s: &str) -> String {
        self.paint("32", s)
    }
    pub fn cyan(self, s: &str) -> String {
        self.paint("36", s)
    }
    pub fn bold(self, s: &str) -> String {
        self.paint("1", s)
    }
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
    fn word_wrapping_never_cuts_a_word_and_keeps_every_character() {
        let s = "the quick brown fox jumps over the lazy dog";
        let pieces = wrap_words(s, 12);
        assert_eq!(pieces.concat(), s);
        for p in &pieces {
            assert!(p.chars().count() <= 12, "{p:?}");
            for w in p.split(' ').filter(|w| !w.is_empty()) {
                assert!(s.split(' ').any(|x| x == w), "{w:?} is a cut word");
            }
        }
        let long = format!("a {}", "x".repeat(25));
        let pieces = wrap_words(&long, 10);
        assert_eq!(pieces.concat(), long);
        assert!(pieces.iter().all(|p| p.chars().count() <= 10));
        assert_eq!(wrap_words("", 10), [""]);
        let spaced = "ab:\"      \",\"pad\"";
        for w in 8..14 {
            let pieces = wrap_words(spaced, w);
            assert_eq!(pieces.concat(), spaced);
            assert!(pieces.iter().all(|p| !p.ends_with(' ')), "{pieces:?}");
            assert!(pieces.iter().all(|p| !p.trim().is_empty()), "{pieces:?}");
        }
    }
}
