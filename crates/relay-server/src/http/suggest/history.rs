//! Suggestions from the user's own history: no provider call and no quota.

use super::acceptable;

/// The newest line of `recent` (oldest first) that strictly extends `partial` and is safe,
/// preferring one that, in history, followed the command the user ran last.
pub fn complete(partial: &str, recent: &[String]) -> Option<String> {
    let extends = |line: &str| line.len() > partial.len() && line.starts_with(partial);
    let last = recent.last()?;
    // Lines that once came right after the command the user just ran, newest first.
    let followers = recent
        .windows(2)
        .rev()
        .filter(|w| &w[0] == last)
        .map(|w| w[1].as_str());
    let newest = recent.iter().rev().map(String::as_str);
    followers
        .chain(newest)
        .filter(|line| extends(line))
        .find(|line| acceptable(partial, line))
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn newest_extension_wins() {
        let recent = h(&["git status", "git stash list", "ls", "git stash pop"]);
        assert_eq!(
            complete("git st", &recent).as_deref(),
            Some("git stash pop")
        );
    }

    #[test]
    fn a_follower_of_the_last_command_is_preferred() {
        // After `cargo build` the user ran `cargo test -p relay` before; now they ran `cargo build` again.
        let recent = h(&[
            "cargo build",
            "cargo test -p relay",
            "cargo test --doc",
            "cargo build",
        ]);
        assert_eq!(
            complete("cargo te", &recent).as_deref(),
            Some("cargo test -p relay")
        );
    }

    #[test]
    fn equal_or_non_extending_or_unsafe_lines_are_skipped() {
        assert_eq!(complete("ls", &h(&["ls"])), None);
        assert_eq!(complete("git", &h(&["gi", "echo git"])), None);
        assert_eq!(complete("rm -r", &h(&["rm -rf /"])), None);
        assert_eq!(
            complete("rm -r", &h(&["rm -rf target", "rm -rf /"])).as_deref(),
            Some("rm -rf target")
        );
    }
}
