//! Completion checks: strict extension, single line, no introduced privilege escalation.

use super::super::reason::*;
use super::super::{Verdict, check_completion};

/// (partial, completed, expected)
const COMPLETIONS: &[(&str, &str, Verdict)] = &[
    ("git sta", "git status", Verdict::Allow),
    ("cargo b", "cargo build --release", Verdict::Allow),
    ("echo \"hel", "echo \"hello\"", Verdict::Allow),
    ("", "ls -la", Verdict::Allow),
    ("ls", "ls; echo sudo", Verdict::Allow),
    ("git status", "git status", Verdict::Refuse(NOT_EXTENDING)),
    ("git status", "git sta", Verdict::Refuse(NOT_EXTENDING)),
    ("git status", "git stash", Verdict::Refuse(NOT_EXTENDING)),
    ("ls", "cat", Verdict::Refuse(NOT_EXTENDING)),
    ("", "", Verdict::Refuse(NOT_EXTENDING)),
    (
        "apt-get update",
        "apt-get update && sudo apt-get upgrade",
        Verdict::Refuse(ELEVATION),
    ),
    (
        "apt-get update",
        "apt-get update; sudo reboot",
        Verdict::Refuse(ELEVATION),
    ),
    ("sud", "sudo apt-get update", Verdict::Refuse(ELEVATION)),
    (
        "make",
        "make && su -c 'make install'",
        Verdict::Refuse(ELEVATION),
    ),
    ("ls", "ls && doas true", Verdict::Refuse(ELEVATION)),
    ("ls", "ls && pkexec true", Verdict::Refuse(ELEVATION)),
    ("ls", "ls | xargs sudo rm", Verdict::Refuse(ELEVATION)),
    ("ls", "ls $(sudo id)", Verdict::Refuse(ELEVATION)),
    ("ls", "ls; env sudo id", Verdict::Refuse(ELEVATION)),
    ("ls", "ls; bash -c 'sudo id'", Verdict::Refuse(ELEVATION)),
    ("sudo apt-get up", "sudo apt-get update", Verdict::Allow),
    ("sudo ", "sudo apt-get update", Verdict::Allow),
    (
        "sudo apt-get update && ",
        "sudo apt-get update && sudo apt-get upgrade",
        Verdict::Refuse(ELEVATION),
    ),
    ("ls", "ls\nrm x", Verdict::Refuse(MULTI_LINE)),
    ("ls", "ls\r", Verdict::Refuse(MULTI_LINE)),
    ("ls", "ls \u{7}", Verdict::Refuse(CONTROL)),
    ("rm -rf", "rm -rf /", Verdict::Refuse(RM_ROOT)),
    ("sudo rm -r", "sudo rm -rf /", Verdict::Refuse(RM_ROOT)),
    (
        "git push",
        "git push --force",
        Verdict::Refuse(GIT_FORCE_PUSH),
    ),
    ("git push", "git push --force-with-lease", Verdict::Allow),
    ("echo ", "echo \"unterminated", Verdict::Refuse(UNPARSEABLE)),
    (
        "export T=",
        "export T=ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
        Verdict::Refuse(SECRET),
    ),
];

#[test]
fn completions() {
    for &(partial, completed, expected) in COMPLETIONS {
        let verdict = check_completion(partial, completed);
        if let Verdict::Refuse(_) = expected {
            assert!(
                matches!(verdict, Verdict::Refuse(_)),
                "{partial:?} -> {completed:?}: {verdict:?}"
            );
        }
        assert_eq!(verdict, expected, "{partial:?} -> {completed:?}");
    }
}
