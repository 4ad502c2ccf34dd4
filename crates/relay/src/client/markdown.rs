//! The streamed answer rendered for a colour terminal, line by line: headings bold, list items
//! with bullets, quotes barred, `code` and fenced code blocks coloured, **strong** and *emphasis*
//! styled (pulldown-cmark parses each line's inline Markdown); a fenced block that names its
//! language is highlighted token by token (`highlight.rs`). A line is shown as its text
//! arrives, escaped as always; when its line end comes it is redrawn rendered, unless it has
//! wrapped on the screen (then it stays as it is). Everything rendered comes from escaped text,
//! so the only escape sequences written are the styles added here.

use pulldown_cmark::{Event, Parser, Tag, TagEnd};

use super::display::{self, Paint};
use super::highlight::{Block, Grammars};

pub struct Markdown {
    paint: Paint,
    width: usize,
    in_code: bool,
    grammars: Grammars,
    /// The open fenced block's highlighter, when its language is known.
    block: Option<Block>,
    /// The current line's text so far, escaped.
    line: String,
    /// Characters of it already on the screen.
    shown: usize,
}

impl Markdown {
    pub fn new(paint: Paint, width: usize, grammars: Grammars) -> Self {
        Self {
            paint,
            width,
            in_code: false,
            grammars,
            block: None,
            line: String::new(),
            shown: 0,
        }
    }

    /// What to print for a streamed piece of the answer.
    pub fn push(&mut self, piece: &str) -> String {
        let mut out = String::new();
        for part in display::text(piece).split_inclusive('\n') {
            match part.strip_suffix('\n') {
                Some(head) => {
                    self.line.push_str(head);
                    out.push_str(&self.end_line());
                    out.push('\n');
                }
                None => {
                    self.line.push_str(part);
                    self.shown += part.chars().count();
                    out.push_str(part);
                }
            }
        }
        out
    }

    /// The end of the answer: its last line (if it had no line end) rendered.
    pub fn finish(&mut self) -> String {
        if self.line.is_empty() {
            String::new()
        } else {
            self.end_line()
        }
    }

    /// The line in progress, ended: redrawn rendered where it is still on one screen line.
    fn end_line(&mut self) -> String {
        let line = std::mem::take(&mut self.line);
        let shown = std::mem::take(&mut self.shown);
        let total = line.chars().count();
        if shown > 0 && total >= self.width {
            // Wrapped on the screen: a redraw would clear only its last row. Rendered all the
            // same (and not shown), so a fence or a code block's parser state follows it.
            let rest: String = line.chars().skip(shown).collect();
            self.render(&line);
            return rest;
        }
        let rendered = self.render(&line);
        if shown > 0 {
            format!("\r\x1b[2K{rendered}")
        } else {
            rendered
        }
    }

    /// One complete line, styled.
    pub fn render(&mut self, line: &str) -> String {
        let p = self.paint;
        if let Some(info) = line.trim_start().strip_prefix("```") {
            self.in_code = !self.in_code;
            self.block = if self.in_code {
                self.grammars.block(info.trim())
            } else {
                None
            };
            return p.dim(line);
        }
        if self.in_code {
            return match self.block.as_mut() {
                Some(block) => block.line(line),
                None => p.paint("33", line),
            };
        }
        let indent: String = line.chars().take_while(|c| *c == ' ').collect();
        let mut out = indent;
        for event in Parser::new(line) {
            match event {
                Event::Start(Tag::Heading { .. }) => out.push_str("\x1b[1m"),
                Event::End(TagEnd::Heading(_)) => out.push_str("\x1b[22m"),
                Event::Start(Tag::Strong) => out.push_str("\x1b[1m"),
                Event::End(TagEnd::Strong) => out.push_str("\x1b[22m"),
                Event::Start(Tag::Emphasis) => out.push_str("\x1b[3m"),
                Event::End(TagEnd::Emphasis) => out.push_str("\x1b[23m"),
                Event::Start(Tag::Item) => out.push_str("• "),
                Event::Start(Tag::List(Some(n))) => out.push_str(&format!("{n}. ")),
                Event::Start(Tag::BlockQuote(_)) => out.push_str(&p.dim("│ ")),
                Event::Code(code) => out.push_str(&p.cyan(&code)),
                Event::Text(t) | Event::Html(t) | Event::InlineHtml(t) => out.push_str(&t),
                Event::SoftBreak | Event::HardBreak => out.push(' '),
                Event::Rule => out.push_str(&p.dim(&"─".repeat(self.width.clamp(3, 40)))),
                _ => {}
            }
        }
        // An ordered item's own number is in `List(Some(n))`; drop the bullet it would also get.
        out.replacen(". • ", ". ", 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md() -> Markdown {
        Markdown::new(Paint { on: true }, 80, Grammars::default())
    }

    #[test]
    fn lines_are_styled_when_they_end() {
        let mut m = md();
        assert_eq!(m.push("# Title\n"), "\x1b[1mTitle\x1b[22m\n");
        assert_eq!(m.push("- use `cargo`\n"), "• use \x1b[36mcargo\x1b[0m\n");
        assert_eq!(m.push("plain words\n"), "plain words\n");
        let code = m.push("```rust\nlet x = 1;\n```\n");
        assert!(code.contains("\x1b[36mlet\x1b[0m x"), "{code:?}");
        let code = m.push("```\nlet x = 1;\n```\n");
        assert!(
            code.contains("\x1b[33mlet x = 1;\x1b[0m"),
            "no language: {code:?}"
        );
        assert_eq!(m.push("**b**\n"), "\x1b[1mb\x1b[22m\n");
    }

    #[test]
    fn a_line_streams_as_it_comes_then_is_redrawn() {
        let mut m = md();
        assert_eq!(m.push("## Hea"), "## Hea");
        assert_eq!(
            m.push("ding\nnext"),
            "\r\x1b[2K\x1b[1mHeading\x1b[22m\nnext"
        );
        assert_eq!(m.finish(), "\r\x1b[2Knext");
    }

    #[test]
    fn control_characters_stay_escaped() {
        let mut m = md();
        let out = m.push("\x1b[2Jfinal\x1b[31m answer\x1b]0;owned\x07\n");
        assert_eq!(out, "\\x1b[2Jfinal\\x1b[31m answer\\x1b]0;owned\\x07\n");
        let out = m.push("`\x1b]52;c;aGk=\x07`\n");
        assert!(!out.contains("\x1b]"), "{out:?}");
    }

    #[test]
    fn a_wrapped_line_is_left_as_it_is() {
        let mut m = Markdown::new(Paint { on: true }, 10, Grammars::default());
        assert_eq!(m.push("**long bold"), "**long bold");
        assert_eq!(m.push(" text**\n"), " text**\n");
    }
}
