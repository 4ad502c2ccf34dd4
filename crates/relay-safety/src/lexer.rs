//! The tokenizer: shell words, quotes, escapes, substitutions, operators and redirections.

use super::parser::{Op, RedirOp, Script, SpanMap, Word, parse};
use super::reason::UNPARSEABLE;
use super::scan::{find_byte, find_close, hex_value, redir_op};

pub(super) enum Tok {
    Word(Word),
    Op(Op),
    Redir(RedirOp),
    Gone,
}

#[derive(Default)]
struct WordBuf {
    value: Vec<u8>,
    quoted: bool,
    lead_expansion: bool,
    literal_seen: bool,
    brace: bool,
    in_dquote: bool,
    unquoted_expansion: bool,
    subs: Vec<Script>,
}

impl WordBuf {
    fn lit(&mut self, c: u8) {
        self.value.push(c);
        self.literal_seen = true;
    }

    fn lits(&mut self, s: &[u8]) {
        if !s.is_empty() {
            self.value.extend_from_slice(s);
            self.literal_seen = true;
        }
    }

    fn expansion(&mut self, raw: &[u8]) {
        if !self.literal_seen {
            self.lead_expansion = true;
        }
        if !self.in_dquote {
            self.unquoted_expansion = true;
        }
        self.value.extend_from_slice(raw);
        self.literal_seen = true;
    }
}

pub(super) struct Lexer<'a> {
    pub(super) buf: &'a [u8],
    pub(super) map: SpanMap,
    pub(super) depth: usize,
}

impl Lexer<'_> {
    pub(super) fn lex(&self) -> Result<Vec<Tok>, &'static str> {
        let b = self.buf;
        let n = b.len();
        let mut toks = Vec::new();
        let mut i = 0;
        while i < n {
            let c = b[i];
            let next = b.get(i + 1).copied();
            match c {
                b' ' | b'\t' => i += 1,
                b'\n' => {
                    toks.push(Tok::Op(Op::Newline));
                    i += 1;
                }
                b'#' => {
                    while i < n && b[i] != b'\n' {
                        i += 1;
                    }
                }
                b';' => {
                    if matches!(next, Some(b';' | b'&')) {
                        return Err(UNPARSEABLE);
                    }
                    toks.push(Tok::Op(Op::Semi));
                    i += 1;
                }
                b'&' => match next {
                    Some(b'&') => {
                        toks.push(Tok::Op(Op::And));
                        i += 2;
                    }
                    Some(b'>') => {
                        i += if b.get(i + 2) == Some(&b'>') { 3 } else { 2 };
                        toks.push(Tok::Redir(RedirOp::Write));
                    }
                    _ => {
                        toks.push(Tok::Op(Op::Amp));
                        i += 1;
                    }
                },
                b'|' => {
                    let (op, len) = match next {
                        Some(b'|') => (Op::Or, 2),
                        Some(b'&') => (Op::Pipe, 2),
                        _ => (Op::Pipe, 1),
                    };
                    toks.push(Tok::Op(op));
                    i += len;
                }
                b'(' => {
                    toks.push(Tok::Op(Op::LParen));
                    i += 1;
                }
                b')' => {
                    toks.push(Tok::Op(Op::RParen));
                    i += 1;
                }
                b'<' | b'>' if next != Some(b'(') => {
                    let (op, j) = redir_op(b, i);
                    toks.push(Tok::Redir(op));
                    i = j;
                }
                b'0'..=b'9' => {
                    let mut j = i;
                    while j < n && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    if j < n && (b[j] == b'<' || b[j] == b'>') && b.get(j + 1) != Some(&b'(') {
                        let (op, k) = redir_op(b, j);
                        toks.push(Tok::Redir(op));
                        i = k;
                    } else {
                        let (w, j) = self.word(i)?;
                        toks.push(Tok::Word(w));
                        i = j;
                    }
                }
                _ => {
                    let (w, j) = self.word(i)?;
                    toks.push(Tok::Word(w));
                    i = j;
                }
            }
        }
        Ok(toks)
    }

    fn sub_script(&self, start: usize, end: usize) -> Result<Script, &'static str> {
        let inner = self.buf.get(start..end).ok_or(UNPARSEABLE)?;
        parse(inner, self.map.shift(start), self.depth + 1)
    }

    fn word(&self, start: usize) -> Result<(Word, usize), &'static str> {
        let b = self.buf;
        let n = b.len();
        let mut i = start;
        let mut w = WordBuf::default();
        if matches!(b.get(i), Some(b'<' | b'>')) && b.get(i + 1) == Some(&b'(') {
            let close = find_close(b, i + 2, self.depth)?;
            w.subs.push(self.sub_script(i + 2, close)?);
            w.expansion(&b[i..=close]);
            i = close + 1;
        }
        while i < n {
            let c = b[i];
            match c {
                b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>' => break,
                b'\\' => match b.get(i + 1) {
                    None => return Err(UNPARSEABLE),
                    Some(b'\n') => i += 2,
                    Some(&d) => {
                        w.lit(d);
                        w.quoted = true;
                        i += 2;
                    }
                },
                b'\'' => {
                    let end = find_byte(b, i + 1, b'\'')?;
                    w.lits(&b[i + 1..end]);
                    w.quoted = true;
                    i = end + 1;
                }
                b'"' => i = self.dquote(i, &mut w)?,
                b'$' => i = self.dollar(i, &mut w, false)?,
                b'`' => i = self.backtick(i, &mut w)?,
                _ => {
                    if c == b'{' {
                        w.brace = true;
                    }
                    w.lit(c);
                    i += 1;
                }
            }
        }
        let word = Word {
            value: String::from_utf8_lossy(&w.value).into_owned(),
            span: self.map.map(start, i),
            quoted: w.quoted,
            lead_expansion: w.lead_expansion,
            brace: w.brace,
            unquoted_expansion: w.unquoted_expansion,
            subs: w.subs,
        };
        Ok((word, i))
    }

    /// Lexes a double-quoted string starting at the `"` at `i`; returns the index after it.
    fn dquote(&self, i: usize, w: &mut WordBuf) -> Result<usize, &'static str> {
        let b = self.buf;
        let mut j = i + 1;
        w.quoted = true;
        let outer = w.in_dquote;
        w.in_dquote = true;
        loop {
            let c = *b.get(j).ok_or(UNPARSEABLE)?;
            match c {
                b'"' => {
                    w.in_dquote = outer;
                    return Ok(j + 1);
                }
                b'\\' => {
                    let d = *b.get(j + 1).ok_or(UNPARSEABLE)?;
                    match d {
                        b'$' | b'`' | b'"' | b'\\' => {
                            w.lit(d);
                            j += 2;
                        }
                        b'\n' => j += 2,
                        _ => {
                            w.lit(b'\\');
                            j += 1;
                        }
                    }
                }
                b'$' => j = self.dollar(j, w, true)?,
                b'`' => j = self.backtick(j, w)?,
                _ => {
                    w.lit(c);
                    j += 1;
                }
            }
        }
    }

    /// Lexes whatever starts with the `$` at `i`; returns the index after it.
    fn dollar(&self, i: usize, w: &mut WordBuf, in_dquote: bool) -> Result<usize, &'static str> {
        let b = self.buf;
        match b.get(i + 1).copied() {
            Some(b'(') => {
                let close = find_close(b, i + 2, self.depth)?;
                w.subs.push(self.sub_script(i + 2, close)?);
                w.expansion(&b[i..=close]);
                Ok(close + 1)
            }
            Some(b'{') => {
                let close = self.param(i + 2, w)?;
                w.expansion(&b[i..=close]);
                Ok(close + 1)
            }
            Some(b'\'') if !in_dquote => self.ansi_c(i + 2, w),
            Some(b'"') if !in_dquote => self.dquote(i + 1, w),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {
                let mut j = i + 1;
                while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                    j += 1;
                }
                w.expansion(&b[i..j]);
                Ok(j)
            }
            Some(c) if c.is_ascii_digit() || b"@*#?$!-".contains(&c) => {
                w.expansion(&b[i..i + 2]);
                Ok(i + 2)
            }
            _ => {
                w.lit(b'$');
                Ok(i + 1)
            }
        }
    }

    /// Scans `${...}` contents starting at `i`, collecting substitutions; returns the `}` index.
    fn param(&self, mut i: usize, w: &mut WordBuf) -> Result<usize, &'static str> {
        let b = self.buf;
        let mut level = 1usize;
        loop {
            let c = *b.get(i).ok_or(UNPARSEABLE)?;
            match c {
                b'}' => {
                    level -= 1;
                    if level == 0 {
                        return Ok(i);
                    }
                    i += 1;
                }
                b'{' => {
                    level += 1;
                    i += 1;
                }
                b'\\' => i += 2,
                b'\'' => i = find_byte(b, i + 1, b'\'')? + 1,
                b'"' => {
                    let mut scratch = WordBuf::default();
                    i = self.dquote(i, &mut scratch)?;
                    w.subs.append(&mut scratch.subs);
                }
                b'$' if b.get(i + 1) == Some(&b'(') => {
                    let close = find_close(b, i + 2, self.depth)?;
                    w.subs.push(self.sub_script(i + 2, close)?);
                    i = close + 1;
                }
                b'`' => {
                    let mut scratch = WordBuf::default();
                    i = self.backtick(i, &mut scratch)?;
                    w.subs.append(&mut scratch.subs);
                }
                _ => i += 1,
            }
        }
    }

    /// Lexes a backtick substitution starting at the backtick at `i`.
    fn backtick(&self, i: usize, w: &mut WordBuf) -> Result<usize, &'static str> {
        let b = self.buf;
        let mut j = i + 1;
        let mut inner = Vec::new();
        loop {
            let c = *b.get(j).ok_or(UNPARSEABLE)?;
            match c {
                b'`' => break,
                b'\\' => {
                    let d = *b.get(j + 1).ok_or(UNPARSEABLE)?;
                    if !matches!(d, b'`' | b'\\' | b'$') {
                        inner.push(b'\\');
                    }
                    inner.push(d);
                    j += 2;
                }
                _ => {
                    inner.push(c);
                    j += 1;
                }
            }
        }
        w.subs
            .push(parse(&inner, self.map.pin(i, j + 1), self.depth + 1)?);
        w.expansion(&b[i..=j]);
        Ok(j + 1)
    }

    /// Decodes an ANSI-C `$'...'` string whose contents start at `j`.
    fn ansi_c(&self, mut j: usize, w: &mut WordBuf) -> Result<usize, &'static str> {
        let b = self.buf;
        w.quoted = true;
        loop {
            let c = *b.get(j).ok_or(UNPARSEABLE)?;
            match c {
                b'\'' => return Ok(j + 1),
                b'\\' => {
                    let d = *b.get(j + 1).ok_or(UNPARSEABLE)?;
                    j += 2;
                    let decoded = match d {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'a' => 7,
                        b'b' => 8,
                        b'e' | b'E' => 27,
                        b'f' => 12,
                        b'v' => 11,
                        b'\\' | b'\'' | b'"' | b'?' => d,
                        b'x' => {
                            let mut value = 0u32;
                            let mut k = j;
                            while k < j + 2 && k < b.len() && b[k].is_ascii_hexdigit() {
                                value = value * 16 + u32::from(hex_value(b[k]));
                                k += 1;
                            }
                            if k == j {
                                w.lit(b'\\');
                                b'x'
                            } else {
                                j = k;
                                (value & 0xff) as u8
                            }
                        }
                        b'0'..=b'7' => {
                            let mut value = u32::from(d - b'0');
                            let mut k = j;
                            while k < j + 2 && k < b.len() && (b'0'..=b'7').contains(&b[k]) {
                                value = value * 8 + u32::from(b[k] - b'0');
                                k += 1;
                            }
                            j = k;
                            (value & 0xff) as u8
                        }
                        b'u' | b'U' | b'c' => return Err(UNPARSEABLE),
                        _ => {
                            w.lit(b'\\');
                            d
                        }
                    };
                    w.lit(decoded);
                }
                _ => {
                    w.lit(c);
                    j += 1;
                }
            }
        }
    }
}
