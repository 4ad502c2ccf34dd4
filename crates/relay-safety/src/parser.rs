//! The parsed form of a line (words, commands, redirections, operators) and its parser.

use super::MAX_DEPTH;
use super::lexer::{Lexer, Tok};
use super::reason::{TOO_DEEP, UNPARSEABLE};

/// Maps byte offsets of the text being lexed to offsets in the top-level line. Text derived by
/// unescaping (backticks, `sh -c` scripts) maps every offset to the span it came from.
#[derive(Clone, Copy)]
pub(super) enum SpanMap {
    Offset(usize),
    Fixed(usize, usize),
}

impl SpanMap {
    pub(super) fn map(self, start: usize, end: usize) -> (usize, usize) {
        match self {
            SpanMap::Offset(base) => (base + start, base + end),
            SpanMap::Fixed(a, b) => (a, b),
        }
    }

    pub(super) fn shift(self, start: usize) -> SpanMap {
        match self {
            SpanMap::Offset(base) => SpanMap::Offset(base + start),
            fixed => fixed,
        }
    }

    pub(super) fn pin(self, start: usize, end: usize) -> SpanMap {
        let (a, b) = self.map(start, end);
        SpanMap::Fixed(a, b)
    }
}

/// One shell word after quote removal. Expansions stay in `value` as their raw text.
pub(super) struct Word {
    pub(super) value: String,
    pub(super) span: (usize, usize),
    /// Some part was quoted or escaped (so it is never a reserved word).
    pub(super) quoted: bool,
    /// The word starts with a parameter, command or process substitution.
    pub(super) lead_expansion: bool,
    /// An unquoted `{` appears (brace expansion may apply).
    pub(super) brace: bool,
    /// An expansion outside double quotes appears (its result is split into words).
    pub(super) unquoted_expansion: bool,
    /// Command and process substitutions inside the word, parsed.
    pub(super) subs: Vec<Script>,
}

pub(super) type Script = Vec<Pipeline>;
pub(super) type Pipeline = Vec<Cmd>;

pub(super) enum Cmd {
    Simple {
        words: Vec<Word>,
        redirs: Vec<Redir>,
    },
    Compound {
        body: Script,
        redirs: Vec<Redir>,
    },
    Function {
        name: String,
        body: Script,
    },
}

impl Cmd {
    fn is_empty(&self) -> bool {
        matches!(self, Cmd::Simple { words, redirs } if words.is_empty() && redirs.is_empty())
    }
}

pub(super) struct Redir {
    pub(super) op: RedirOp,
    pub(super) target: Word,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum RedirOp {
    Read,
    Write,
    DupOut,
    DupIn,
    HereDoc,
    HereString,
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Op {
    Semi,
    Amp,
    And,
    Or,
    Pipe,
    Newline,
    LParen,
    RParen,
}

pub(super) fn parse(buf: &[u8], map: SpanMap, depth: usize) -> Result<Script, &'static str> {
    if depth > MAX_DEPTH {
        return Err(TOO_DEEP);
    }
    let toks = Lexer { buf, map, depth }.lex()?;
    let mut parser = Parser { toks, pos: 0 };
    let script = parser.list(End::Eof, depth)?;
    if parser.pos != parser.toks.len() {
        return Err(UNPARSEABLE);
    }
    Ok(script)
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    Eof,
    Paren,
    Brace,
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn op_at(&self, k: usize) -> Option<Op> {
        match self.toks.get(self.pos + k) {
            Some(Tok::Op(op)) => Some(*op),
            _ => None,
        }
    }

    fn keyword(&self) -> Option<&str> {
        match self.toks.get(self.pos) {
            Some(Tok::Word(w)) if !w.quoted => Some(w.value.as_str()),
            _ => None,
        }
    }

    fn take_word(&mut self) -> Option<Word> {
        let slot = self.toks.get_mut(self.pos)?;
        if !matches!(slot, Tok::Word(_)) {
            return None;
        }
        let Tok::Word(w) = std::mem::replace(slot, Tok::Gone) else {
            return None;
        };
        self.pos += 1;
        Some(w)
    }

    fn skip_newlines(&mut self) {
        while self.op_at(0) == Some(Op::Newline) {
            self.pos += 1;
        }
    }

    fn done(&self) -> bool {
        self.pos >= self.toks.len()
    }

    fn at_end(&self, end: End) -> bool {
        match end {
            End::Eof => self.done(),
            End::Paren => self.op_at(0) == Some(Op::RParen),
            End::Brace => self.keyword() == Some("}"),
        }
    }

    fn list(&mut self, end: End, depth: usize) -> Result<Script, &'static str> {
        if depth > MAX_DEPTH {
            return Err(TOO_DEEP);
        }
        let mut script = Vec::new();
        loop {
            self.skip_newlines();
            if self.at_end(end) {
                break;
            }
            if self.done() {
                return Err(UNPARSEABLE);
            }
            script.push(self.pipeline(depth)?);
            match self.op_at(0) {
                Some(Op::Semi | Op::Amp | Op::Newline) => self.pos += 1,
                Some(Op::And | Op::Or) => {
                    self.pos += 1;
                    self.skip_newlines();
                    if self.done()
                        || self.at_end(end)
                        || matches!(
                            self.op_at(0),
                            Some(Op::Semi | Op::Amp | Op::And | Op::Or | Op::Pipe | Op::RParen)
                        )
                    {
                        return Err(UNPARSEABLE);
                    }
                }
                _ if self.at_end(end) => break,
                _ => return Err(UNPARSEABLE),
            }
        }
        Ok(script)
    }

    fn pipeline(&mut self, depth: usize) -> Result<Pipeline, &'static str> {
        let mut cmds = vec![self.command(depth)?];
        while self.op_at(0) == Some(Op::Pipe) {
            if cmds.last().is_some_and(Cmd::is_empty) {
                return Err(UNPARSEABLE);
            }
            self.pos += 1;
            self.skip_newlines();
            let cmd = self.command(depth)?;
            if cmd.is_empty() {
                return Err(UNPARSEABLE);
            }
            cmds.push(cmd);
        }
        if matches!(self.op_at(0), Some(Op::And | Op::Or)) && cmds.last().is_some_and(Cmd::is_empty)
        {
            return Err(UNPARSEABLE);
        }
        Ok(cmds)
    }

    fn command(&mut self, depth: usize) -> Result<Cmd, &'static str> {
        loop {
            match self.keyword() {
                Some("!" | "if" | "then" | "else" | "elif" | "do" | "while" | "until") => {
                    self.pos += 1
                }
                Some("fi" | "done") => {
                    self.pos += 1;
                    let redirs = self.redirs()?;
                    return Ok(Cmd::Compound {
                        body: Vec::new(),
                        redirs,
                    });
                }
                Some("time") => {
                    // The `time` keyword before a subshell or group; otherwise a wrapper.
                    let mut k = self.pos + 1;
                    while let Some(Tok::Word(w)) = self.toks.get(k)
                        && !w.quoted
                        && matches!(w.value.as_str(), "-p" | "--")
                    {
                        k += 1;
                    }
                    let compound = match self.toks.get(k) {
                        Some(Tok::Op(Op::LParen)) => true,
                        Some(Tok::Word(w)) => !w.quoted && w.value == "{",
                        _ => false,
                    };
                    if !compound {
                        break;
                    }
                    self.pos = k;
                }
                Some("case" | "esac" | "coproc") => return Err(UNPARSEABLE),
                _ => break,
            }
        }
        if self.op_at(0) == Some(Op::LParen) {
            self.pos += 1;
            let body = self.list(End::Paren, depth + 1)?;
            if self.op_at(0) != Some(Op::RParen) {
                return Err(UNPARSEABLE);
            }
            self.pos += 1;
            let redirs = self.redirs()?;
            return Ok(Cmd::Compound { body, redirs });
        }
        match self.keyword() {
            Some("{") => {
                self.pos += 1;
                let body = self.list(End::Brace, depth + 1)?;
                if self.keyword() != Some("}") {
                    return Err(UNPARSEABLE);
                }
                self.pos += 1;
                let redirs = self.redirs()?;
                return Ok(Cmd::Compound { body, redirs });
            }
            Some("function") => {
                self.pos += 1;
                let name = self.take_word().ok_or(UNPARSEABLE)?.value;
                if self.op_at(0) == Some(Op::LParen) && self.op_at(1) == Some(Op::RParen) {
                    self.pos += 2;
                }
                return self.function_body(name, depth);
            }
            _ => {}
        }
        if matches!(self.toks.get(self.pos), Some(Tok::Word(_)))
            && self.op_at(1) == Some(Op::LParen)
            && self.op_at(2) == Some(Op::RParen)
        {
            let name = self.take_word().ok_or(UNPARSEABLE)?.value;
            self.pos += 2;
            return self.function_body(name, depth);
        }
        self.simple()
    }

    fn function_body(&mut self, name: String, depth: usize) -> Result<Cmd, &'static str> {
        self.skip_newlines();
        if self.op_at(0) != Some(Op::LParen) && self.keyword() != Some("{") {
            return Err(UNPARSEABLE);
        }
        match self.command(depth)? {
            Cmd::Compound { body, .. } => Ok(Cmd::Function { name, body }),
            _ => Err(UNPARSEABLE),
        }
    }

    fn redirs(&mut self) -> Result<Vec<Redir>, &'static str> {
        let mut redirs = Vec::new();
        while let Some(Tok::Redir(op)) = self.toks.get(self.pos) {
            let op = *op;
            self.pos += 1;
            let target = self.take_word().ok_or(UNPARSEABLE)?;
            redirs.push(Redir { op, target });
        }
        Ok(redirs)
    }

    fn simple(&mut self) -> Result<Cmd, &'static str> {
        let mut words = Vec::new();
        let mut redirs = Vec::new();
        loop {
            match self.toks.get(self.pos) {
                Some(Tok::Word(_)) => words.extend(self.take_word()),
                Some(Tok::Redir(_)) => redirs.append(&mut self.redirs()?),
                Some(Tok::Op(Op::LParen)) => return Err(UNPARSEABLE),
                _ => break,
            }
        }
        Ok(Cmd::Simple { words, redirs })
    }
}
