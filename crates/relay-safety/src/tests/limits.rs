//! Limits and robustness: line length, nesting depth, worst-case inputs, random noise.

use std::time::{Duration, Instant};

use super::super::reason::*;
use super::super::{
    MAX_DEPTH, MAX_LINE_BYTES, Verdict, check_command, check_completion, looks_like_secret,
    redact_secrets,
};

#[test]
fn length_limit() {
    let at_limit = format!("echo {}", "a".repeat(MAX_LINE_BYTES - 5));
    assert_eq!(at_limit.len(), MAX_LINE_BYTES);
    assert_eq!(check_command(&at_limit), Verdict::Allow);
    let over = format!("{at_limit}a");
    assert_eq!(check_command(&over), Verdict::Refuse(TOO_LONG));
}

#[test]
fn nesting_is_bounded() {
    let deep = format!("echo {}ls{}", "$(".repeat(20), ")".repeat(20));
    assert_eq!(check_command(&deep), Verdict::Refuse(TOO_DEEP));
    let parens = format!("{}ls{}", "(".repeat(30), ")".repeat(30));
    assert_eq!(check_command(&parens), Verdict::Refuse(TOO_DEEP));
    let ticks = format!("echo {}", "\"$(echo ".repeat(20)) + &")\"".repeat(20);
    assert_eq!(check_command(&ticks), Verdict::Refuse(TOO_DEEP));
    let shallow = format!("echo {}ls{}", "$(echo ".repeat(8), ")".repeat(8));
    assert_eq!(check_command(&shallow), Verdict::Allow);
    let shallow_rm = format!("echo {}$(rm -rf ~){}", "$(echo ".repeat(8), ")".repeat(8));
    assert_eq!(check_command(&shallow_rm), Verdict::Refuse(RM_ROOT));
}

#[test]
fn nested_shell_scripts_stay_fast() {
    // `bash -c "$(bash -c "$( ... )")"`: each level is both a substitution and a script.
    for levels in [4, 10, 15, 40] {
        let line = format!(
            "{}ls{}",
            "bash -c \"$(".repeat(levels),
            ")\"".repeat(levels)
        );
        let start = Instant::now();
        let verdict = check_command(&line);
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{levels} levels took {:?}",
            start.elapsed()
        );
        if levels > MAX_DEPTH {
            assert!(
                matches!(verdict, Verdict::Refuse(_)),
                "{levels}: {verdict:?}"
            );
        }
    }
    let evals = format!("{}ls{}", "eval \"$(".repeat(12), ")\"".repeat(12));
    let start = Instant::now();
    let _ = check_command(&evals);
    assert!(start.elapsed() < Duration::from_secs(2));
}

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const FRAGMENTS: &[&str] = &[
    "rm",
    " -rf ",
    "/",
    "~",
    "*",
    ".",
    "$(",
    ")",
    "`",
    "\"",
    "'",
    "\\",
    "sudo ",
    "bash -c ",
    "sh -c ",
    "|",
    "||",
    "&&",
    "&",
    ";",
    "\n",
    "{",
    "}",
    "(",
    ")",
    "<(",
    ">(",
    "${",
    "$'\\x72",
    "#",
    " ",
    "\t",
    "curl x",
    "wget -O- y",
    "| sh",
    "eval ",
    "env -S ",
    "xargs ",
    "watch ",
    "ssh h ",
    "git push -f",
    "git -c a=b ",
    ":(){ :|:& };:",
    "f(){ f|f& }",
    "dd of=/dev/sda",
    "> /dev/sda",
    "2>&1",
    "<<<",
    "<<EOF",
    "{a,b}",
    "{,}",
    "$HOME",
    "AKIA",
    "ghp_",
    "password=",
    "-----BEGIN ",
    "drop table",
    "if ",
    "then ",
    "fi",
    "do ",
    "done",
    "function ",
    "!",
    "=",
    "--",
    "-",
    "find . -exec ",
    "\\;",
    "ü",
    "\u{202e}",
    "\r",
    "\u{0}",
];

#[test]
fn never_panics_on_noise() {
    let start = Instant::now();
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let alphabet = b" \t\n;&|()<>$`'\"\\{}#*~/=-,!:abcdfmorsux019";
    for round in 0..4000 {
        let line = if round % 2 == 0 {
            let len = rng.below(200);
            let bytes: Vec<u8> = (0..len)
                .map(|_| {
                    if rng.below(10) == 0 {
                        (rng.next() & 0xff) as u8
                    } else {
                        alphabet[rng.below(alphabet.len())]
                    }
                })
                .collect();
            String::from_utf8_lossy(&bytes).into_owned()
        } else {
            let pieces = 1 + rng.below(40);
            (0..pieces)
                .map(|_| FRAGMENTS[rng.below(FRAGMENTS.len())])
                .collect()
        };
        let _ = check_command(&line);
        let _ = looks_like_secret(&line);
        let redacted = redact_secrets(&line);
        assert!(redacted.len() <= line.len() + 10 * line.len().max(1));
        let cut = line
            .char_indices()
            .map(|(i, _)| i)
            .nth(rng.below(line.len() + 1))
            .unwrap_or(0);
        let _ = check_completion(&line[..cut], &line);
    }
    assert!(
        start.elapsed() < Duration::from_secs(20),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn worst_case_inputs_stay_fast() {
    let inputs = [
        "$(".repeat(499),
        "(".repeat(1000),
        "{".repeat(1000),
        "{a,".repeat(250),
        "\"$(".repeat(333),
        "`".repeat(1000),
        "a=".repeat(500),
        "-----BEGIN ".repeat(90),
        ":(){".repeat(250),
        "bash -c ".repeat(125),
        "eval ".repeat(200),
        "echo {,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}{,}".to_string(),
        format!("eval {}", "'eval {,}{,}{,}{,}{,}{,}{,}' ".repeat(30)),
        "ls;".repeat(333),
        "x|".repeat(333) + "x",
    ];
    for input in &inputs {
        let start = Instant::now();
        let _ = check_command(input);
        let _ = redact_secrets(&input.repeat(50));
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "{:?}... took {:?}",
            &input[..20],
            start.elapsed()
        );
    }
}
