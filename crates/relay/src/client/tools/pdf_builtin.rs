//! The built-in PDF renderer, create_pdf's guaranteed floor: a small markdown reading (headings,
//! paragraphs, list items, fenced code) drawn with `pdf-writer` in the standard PDF fonts
//! (Helvetica, Helvetica-Bold, Courier), which every reader has, so nothing is embedded and
//! nothing is fetched. Text outside Windows-1252 shows as `?`.

use pdf_writer::{Content, Finish, Name, Pdf, Rect, Ref, Str, TextStr};

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Heading(u8, String),
    Para(String),
    Item(String),
    Code(Vec<String>),
}

/// `**bold**` and `` `code` `` marks are dropped; the words stay.
fn inline(s: &str) -> String {
    s.replace("**", "").replace('`', "")
}

pub fn blocks(markdown: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut para: Vec<String> = Vec::new();
    let mut code: Option<Vec<String>> = None;
    let flush = |para: &mut Vec<String>, out: &mut Vec<Block>| {
        if !para.is_empty() {
            out.push(Block::Para(inline(&para.join(" "))));
            para.clear();
        }
    };
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            match code.take() {
                Some(lines) => out.push(Block::Code(lines)),
                None => {
                    flush(&mut para, &mut out);
                    code = Some(Vec::new());
                }
            }
            continue;
        }
        if let Some(lines) = code.as_mut() {
            lines.push(line.to_owned());
            continue;
        }
        let t = line.trim();
        let hashes = t.chars().take_while(|c| *c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            flush(&mut para, &mut out);
            out.push(Block::Heading(hashes as u8, inline(t[hashes..].trim())));
        } else if let Some(item) = t
            .strip_prefix("- ")
            .or_else(|| t.strip_prefix("* "))
            .or_else(|| numbered(t))
        {
            flush(&mut para, &mut out);
            out.push(Block::Item(inline(item)));
        } else if t.is_empty() {
            flush(&mut para, &mut out);
        } else {
            para.push(t.to_owned());
        }
    }
    flush(&mut para, &mut out);
    if let Some(lines) = code {
        out.push(Block::Code(lines));
    }
    out
}

/// `3. text` → `text`.
fn numbered(t: &str) -> Option<&str> {
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    (digits > 0).then(|| t[digits..].strip_prefix(". "))?
}

/// Windows-1252 bytes for the standard fonts.
fn encode(s: &str) -> Vec<u8> {
    s.chars()
        .map(|c| match c {
            ' '..='~' => c as u8,
            '\u{a0}'..='\u{ff}' => c as u32 as u8,
            '•' => 0x95,
            '–' => 0x96,
            '—' => 0x97,
            '‘' => 0x91,
            '’' => 0x92,
            '“' => 0x93,
            '”' => 0x94,
            '€' => 0x80,
            '\t' => b' ',
            _ => b'?',
        })
        .collect()
}

/// Greedy word wrap to `max` characters a line (long words are cut).
fn wrap(text: &str, max: usize) -> Vec<String> {
    let mut lines = Vec::new();
    let mut cur = String::new();
    for word in text.split_whitespace() {
        let mut word = word.to_owned();
        while word.chars().count() > max {
            if !cur.is_empty() {
                lines.push(std::mem::take(&mut cur));
            }
            let head: String = word.chars().take(max).collect();
            word = word.chars().skip(max).collect();
            lines.push(head);
        }
        if cur.is_empty() {
            cur = word;
        } else if cur.chars().count() + 1 + word.chars().count() <= max {
            cur.push(' ');
            cur.push_str(&word);
        } else {
            lines.push(std::mem::replace(&mut cur, word));
        }
    }
    if !cur.is_empty() {
        lines.push(cur);
    }
    lines
}

const PAGE_W: f32 = 595.0;
const PAGE_H: f32 = 842.0;
const MARGIN: f32 = 56.0;

/// One drawn line: font, size, x offset from the margin, text.
struct Line(&'static [u8], f32, f32, String);

/// Lines with the space before them, laid out from the blocks.
fn layout(title: &str, blocks: &[Block]) -> Vec<(f32, Line)> {
    let width = PAGE_W - 2.0 * MARGIN;
    // Average glyph widths in em: about 0.5 for Helvetica, 0.55 bold, exactly 0.6 for Courier.
    let chars = |size: f32, em: f32| ((width / (size * em)) as usize).max(10);
    let mut out = Vec::new();
    let heading = |out: &mut Vec<(f32, Line)>, level: u8, text: &str| {
        let size = match level {
            1 => 20.0,
            2 => 16.0,
            _ => 13.0,
        };
        for (i, l) in wrap(text, chars(size, 0.55)).into_iter().enumerate() {
            let gap = if i == 0 { size * 0.9 } else { 0.0 };
            out.push((gap + size * 1.25, Line(b"F2", size, 0.0, l)));
        }
    };
    if !title.is_empty() {
        heading(&mut out, 1, title);
    }
    for b in blocks {
        match b {
            Block::Heading(level, t) => heading(&mut out, *level, t),
            Block::Para(t) => {
                for (i, l) in wrap(t, chars(11.0, 0.5)).into_iter().enumerate() {
                    let gap = if i == 0 { 6.0 } else { 0.0 };
                    out.push((gap + 14.0, Line(b"F1", 11.0, 0.0, l)));
                }
            }
            Block::Item(t) => {
                for (i, l) in wrap(t, chars(11.0, 0.5) - 4).into_iter().enumerate() {
                    let text = if i == 0 { format!("•  {l}") } else { l };
                    let x = if i == 0 { 8.0 } else { 20.0 };
                    out.push((
                        14.0 + if i == 0 { 2.0 } else { 0.0 },
                        Line(b"F1", 11.0, x, text),
                    ));
                }
            }
            Block::Code(lines) => {
                for (i, line) in lines.iter().enumerate() {
                    let max = chars(9.5, 0.6);
                    let expanded = line.replace('\t', "    ");
                    let mut rest: Vec<char> = expanded.chars().collect();
                    let mut first = true;
                    loop {
                        let take = rest.len().min(max);
                        let piece: String = rest.drain(..take).collect();
                        let gap = if i == 0 && first { 6.0 } else { 0.0 };
                        out.push((gap + 12.0, Line(b"F3", 9.5, 12.0, piece)));
                        first = false;
                        if rest.is_empty() {
                            break;
                        }
                    }
                }
            }
        }
    }
    out
}

/// The PDF file for `blocks`, paginated on A4.
pub fn render(title: &str, blocks: &[Block]) -> Vec<u8> {
    let lines = layout(title, blocks);
    let mut pages: Vec<Vec<&Line>> = vec![Vec::new()];
    let mut positions: Vec<Vec<f32>> = vec![Vec::new()];
    let mut y = PAGE_H - MARGIN;
    for (advance, line) in &lines {
        if y - advance < MARGIN {
            pages.push(Vec::new());
            positions.push(Vec::new());
            y = PAGE_H - MARGIN;
        }
        y -= advance;
        if let (Some(p), Some(pos)) = (pages.last_mut(), positions.last_mut()) {
            p.push(line);
            pos.push(y);
        }
    }

    let mut pdf = Pdf::new();
    let catalog = Ref::new(1);
    let tree = Ref::new(2);
    let info = Ref::new(3);
    let fonts = [
        (Ref::new(4), b"F1", b"Helvetica".as_slice()),
        (Ref::new(5), b"F2", b"Helvetica-Bold".as_slice()),
        (Ref::new(6), b"F3", b"Courier".as_slice()),
    ];
    let first_page = 7;
    let page_ids: Vec<Ref> = (0..pages.len())
        .map(|i| Ref::new(first_page + 2 * i as i32))
        .collect();
    pdf.catalog(catalog).pages(tree);
    pdf.pages(tree)
        .kids(page_ids.iter().copied())
        .count(page_ids.len() as i32);
    pdf.document_info(info)
        .title(TextStr(title))
        .producer(TextStr("relay built-in PDF renderer"));
    for (id, _, base) in &fonts {
        pdf.type1_font(*id)
            .base_font(Name(base))
            .encoding_predefined(Name(b"WinAnsiEncoding"));
    }
    for (i, (page_lines, ys)) in pages.iter().zip(&positions).enumerate() {
        let page_id = page_ids[i];
        let content_id = Ref::new(page_id.get() + 1);
        let mut page = pdf.page(page_id);
        page.media_box(Rect::new(0.0, 0.0, PAGE_W, PAGE_H))
            .parent(tree)
            .contents(content_id);
        {
            let mut resources = page.resources();
            let mut f = resources.fonts();
            for (id, name, _) in &fonts {
                f.pair(Name(name.as_slice()), *id);
            }
        }
        page.finish();
        let mut content = Content::new();
        for (Line(font, size, x, text), y) in page_lines.iter().zip(ys) {
            content.begin_text();
            content.set_font(Name(font), *size);
            content.next_line(MARGIN + x, *y);
            content.show(Str(&encode(text)));
            content.end_text();
        }
        pdf.stream(content_id, &content.finish());
    }
    pdf.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markdown_becomes_blocks() {
        let b =
            blocks("# Title\n\nSome **bold**\ntext.\n\n- one\n2. two\n\n```\nfn main() {}\n```\n");
        assert_eq!(
            b,
            vec![
                Block::Heading(1, "Title".into()),
                Block::Para("Some bold text.".into()),
                Block::Item("one".into()),
                Block::Item("two".into()),
                Block::Code(vec!["fn main() {}".into()]),
            ]
        );
    }

    #[test]
    fn long_documents_paginate_and_text_is_drawn() {
        let md = (0..200)
            .map(|i| format!("Paragraph number {i} with some words.\n"))
            .collect::<Vec<_>>()
            .join("\n");
        let pdf = render("Report", &blocks(&md));
        let text = String::from_utf8_lossy(&pdf);
        assert!(text.starts_with("%PDF-"));
        assert!(text.contains("(Paragraph number 199 with some words.) Tj"));
        let count: u32 = text
            .split("/Count ")
            .nth(1)
            .and_then(|t| t.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap();
        assert!(count > 2, "{count} pages");
        assert!(wrap("a b c d e f", 3).iter().all(|l| l.len() <= 3));
    }
}
