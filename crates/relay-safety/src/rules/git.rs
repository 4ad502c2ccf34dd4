//! Git rules: force pushes, ref deletion, discarded work, history rewrites, config commands.

use super::super::args::Arg;
use super::super::parser::SpanMap;
use super::super::reason::{
    GIT_BRANCH_DELETE, GIT_CLEAN, GIT_CONFIG, GIT_DISCARD, GIT_FORCE_PUSH, GIT_PRUNE,
    GIT_PUSH_DELETE, GIT_RESET_HARD, GIT_REWRITE, GIT_STASH,
};
use super::super::walk::Walker;
use super::fs::{components, trim_wildcards};
use super::{cluster_has, long_matches, positionals, short_cluster};

/// A pathspec meaning the whole tree: `.`, `./`, `..`, `*`, `:/`, `:(top)`.
fn whole_tree(v: &str) -> bool {
    let t = v
        .strip_prefix(":(top)")
        .or_else(|| v.strip_prefix(":/"))
        .unwrap_or(v);
    let (mut comps, _) = components(t);
    trim_wildcards(&mut comps);
    comps.is_empty()
}

impl Walker {
    pub(super) fn git(&mut self, args: &[Arg<'_>], depth: usize, skip: &mut Vec<usize>) {
        let mut i = 0;
        while let Some(a) = args.get(i) {
            let v = a.value.as_str();
            if v.starts_with("-c") || v.starts_with("--config-env") {
                self.refuse(GIT_CONFIG);
                return;
            }
            if matches!(
                v,
                "-C" | "--git-dir"
                    | "--work-tree"
                    | "--namespace"
                    | "--super-prefix"
                    | "--attr-source"
            ) {
                i += 2;
                continue;
            }
            if v.starts_with('-') {
                i += 1;
                continue;
            }
            break;
        }
        let Some(sub) = args.get(i) else {
            return;
        };
        let sa = args.get(i + 1..).unwrap_or_default();
        match sub.value.as_str() {
            "push" => self.git_push(sa),
            "config" => self.git_config(sa, depth, skip),
            "reset" => self.refuse_if(
                sa.iter().any(|a| long_matches(&a.value, "--hard", 4)),
                GIT_RESET_HARD,
            ),
            "clean" => self.git_clean(sa),
            "checkout" => self.git_checkout(sa),
            "switch" => {
                let forced = sa.iter().any(|a| {
                    a.value == "--discard-changes"
                        || long_matches(&a.value, "--force", 5)
                        || cluster_has(&a.value, b'f', b"cC")
                });
                if forced {
                    self.refuse(GIT_DISCARD);
                }
            }
            "restore" => self.git_restore(sa),
            "branch" => self.git_branch(sa),
            "stash" => self.refuse_if(
                positionals(sa)
                    .next()
                    .is_some_and(|a| matches!(a.value.as_str(), "drop" | "clear")),
                GIT_STASH,
            ),
            "filter-branch" | "filter-repo" => self.refuse(GIT_REWRITE),
            "reflog" => self.refuse_if(
                sa.iter()
                    .any(|a| matches!(a.value.as_str(), "expire" | "delete")),
                GIT_PRUNE,
            ),
            "gc" => self.refuse_if(
                sa.iter()
                    .any(|a| a.value.starts_with("--prune=") && !a.value.contains("ago")),
                GIT_PRUNE,
            ),
            "prune" => self.refuse_if(
                !sa.iter()
                    .any(|a| matches!(a.value.as_str(), "-n" | "--dry-run")),
                GIT_PRUNE,
            ),
            _ => {}
        }
    }

    /// Values of config keys that git later runs as commands (`alias.x '!...'`, `core.pager`,
    /// `core.sshCommand`, filters, ...) are checked as command lines.
    fn git_config(&mut self, sa: &[Arg<'_>], depth: usize, skip: &mut Vec<usize>) {
        const RUNS: &[&str] = &[
            ".pager",
            ".editor",
            ".sshcommand",
            ".fsmonitor",
            ".textconv",
            ".clean",
            ".smudge",
            ".process",
            ".helper",
            ".cmd",
            ".command",
            ".external",
            ".program",
            ".hookspath",
        ];
        let mut values = positionals(sa);
        let Some(key) = values.next() else {
            return;
        };
        let key = key.value.to_ascii_lowercase();
        if !(key.starts_with("alias.") || RUNS.iter().any(|s| key.ends_with(s))) {
            return;
        }
        for v in values {
            skip.push(v.word);
            // `alias.x '!cmd'` runs a shell command; `alias.x 'push -f'` runs `git push -f`.
            let text = match v.value.strip_prefix('!') {
                Some(shell) => shell.to_string(),
                None if key.starts_with("alias.") => format!("git {}", v.value),
                None => v.value.clone(),
            };
            self.check_text(&text, SpanMap::Fixed(v.span.0, v.span.1), depth + 1);
        }
    }

    fn git_push(&mut self, sa: &[Arg<'_>]) {
        let (mut force, mut delete) = (false, false);
        let mut ended = false;
        let mut skip_next = false;
        for a in sa {
            if skip_next {
                skip_next = false;
                continue;
            }
            let v = a.value.as_str();
            if !ended && v == "--" {
                ended = true;
                continue;
            }
            if !ended && v.starts_with("--") {
                force |= long_matches(v, "--force", 3);
                delete |= long_matches(v, "--delete", 4)
                    || long_matches(v, "--mirror", 4)
                    || long_matches(v, "--prune", 5);
                skip_next = matches!(v, "--repo" | "--receive-pack" | "--exec" | "--push-option");
                continue;
            }
            if !ended && let Some(cluster) = short_cluster(v) {
                for (j, &c) in cluster.iter().enumerate() {
                    match c {
                        b'f' => force = true,
                        b'd' => delete = true,
                        b'o' => {
                            skip_next = j + 1 == cluster.len();
                            break;
                        }
                        _ => {}
                    }
                }
                continue;
            }
            force |= v.starts_with('+');
            delete |= v.starts_with(':');
        }
        if force {
            self.refuse(GIT_FORCE_PUSH);
        }
        if delete {
            self.refuse(GIT_PUSH_DELETE);
        }
    }

    fn git_clean(&mut self, sa: &[Arg<'_>]) {
        let (mut force, mut dry) = (false, false);
        for a in sa {
            let v = a.value.as_str();
            if v == "--" {
                break;
            }
            if v.starts_with("--") {
                force |= long_matches(v, "--force", 4);
                dry |= long_matches(v, "--dry-run", 4) || long_matches(v, "--interactive", 4);
                continue;
            }
            if let Some(cluster) = short_cluster(v) {
                for &c in cluster {
                    match c {
                        b'f' => force = true,
                        b'n' | b'i' => dry = true,
                        b'e' => break,
                        _ => {}
                    }
                }
            }
        }
        if force || !dry {
            self.refuse(GIT_CLEAN);
        }
    }

    fn git_checkout(&mut self, sa: &[Arg<'_>]) {
        let mut discard = false;
        let mut ended = false;
        let mut skip_next = false;
        for a in sa {
            if skip_next {
                skip_next = false;
                continue;
            }
            let v = a.value.as_str();
            if !ended && v == "--" {
                ended = true;
                continue;
            }
            if !ended && v.starts_with("--") {
                discard |= long_matches(v, "--force", 5);
                skip_next = matches!(v, "--orphan" | "--conflict");
                continue;
            }
            if !ended && let Some(cluster) = short_cluster(v) {
                for (j, &c) in cluster.iter().enumerate() {
                    match c {
                        b'f' => discard = true,
                        b'b' | b'B' => {
                            skip_next = j + 1 == cluster.len();
                            break;
                        }
                        _ => {}
                    }
                }
                continue;
            }
            discard |= whole_tree(v);
        }
        if discard {
            self.refuse(GIT_DISCARD);
        }
    }

    fn git_restore(&mut self, sa: &[Arg<'_>]) {
        let (mut staged, mut worktree, mut whole) = (false, false, false);
        let mut ended = false;
        let mut skip_next = false;
        for a in sa {
            if skip_next {
                skip_next = false;
                continue;
            }
            let v = a.value.as_str();
            if !ended && v == "--" {
                ended = true;
                continue;
            }
            if !ended && v.starts_with("--") {
                staged |= v == "--staged";
                worktree |= v == "--worktree";
                skip_next = v == "--source";
                continue;
            }
            if !ended && let Some(cluster) = short_cluster(v) {
                for (j, &c) in cluster.iter().enumerate() {
                    match c {
                        b'S' => staged = true,
                        b'W' => worktree = true,
                        b's' => {
                            skip_next = j + 1 == cluster.len();
                            break;
                        }
                        _ => {}
                    }
                }
                continue;
            }
            whole |= whole_tree(v);
        }
        if whole && (worktree || !staged) {
            self.refuse(GIT_DISCARD);
        }
    }

    fn git_branch(&mut self, sa: &[Arg<'_>]) {
        let (mut delete, mut force, mut big_d) = (false, false, false);
        for a in sa {
            let v = a.value.as_str();
            if v == "--" {
                break;
            }
            if v.starts_with("--") {
                delete |= v == "--delete";
                force |= v == "--force";
                continue;
            }
            if let Some(cluster) = short_cluster(v) {
                big_d |= cluster.contains(&b'D');
                delete |= cluster.contains(&b'd');
                force |= cluster.contains(&b'f');
            }
        }
        if big_d || (delete && force) {
            self.refuse(GIT_BRANCH_DELETE);
        }
    }
}
