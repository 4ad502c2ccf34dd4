//! The project the agent works in: its root (the git top-level, else the working directory), its
//! origin URL, and its id, the first 12 hex characters of SHA-256 of the git remote, else the root,
//! else the cwd (spec §2.1). The relay computes the same id from the `git_remote`, `root` and `cwd`
//! every leg sends, so notes injected by the relay and remember/recall name the same project.

use std::path::{Component, Path, PathBuf};
use std::process::Command;

use anyhow::Context;
use sha2::{Digest, Sha256};

#[derive(Debug, Clone)]
pub struct Project {
    /// Canonical: symlinks resolved, so confinement compares like with like.
    pub root: PathBuf,
    pub cwd: PathBuf,
    pub git_remote: Option<String>,
}

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

impl Project {
    pub fn detect() -> anyhow::Result<Self> {
        let cwd = std::env::current_dir()
            .and_then(|d| d.canonicalize())
            .context("cannot read the working directory")?;
        let root = git(&cwd, &["rev-parse", "--show-toplevel"])
            .and_then(|t| PathBuf::from(t).canonicalize().ok())
            .unwrap_or_else(|| cwd.clone());
        let git_remote = git(&root, &["remote", "get-url", "origin"]);
        Ok(Self {
            root,
            cwd,
            git_remote,
        })
    }

    pub fn root_str(&self) -> String {
        self.root.display().to_string()
    }

    pub fn cwd_str(&self) -> String {
        self.cwd.display().to_string()
    }

    /// The project id of spec §2.1.
    pub fn id(&self) -> String {
        let source = self.git_remote.clone().unwrap_or_else(|| self.root_str());
        hex::encode(Sha256::digest(source.as_bytes()))[..12].to_owned()
    }

    /// How the id was derived, for `relay project`: the git remote, else the repository root,
    /// else the working directory (spec §2.1).
    pub fn derivation(&self) -> String {
        match &self.git_remote {
            Some(remote) => format!("sha256 of the git remote origin {remote}"),
            // A worktree or submodule has a `.git` file rather than a folder: either marks a repository.
            None if self.root.join(".git").exists() => format!(
                "sha256 of the repository root {} (no git remote origin)",
                self.root_str()
            ),
            None => format!(
                "sha256 of the working directory {} (not in a git repository)",
                self.root_str()
            ),
        }
    }

    /// `path` (relative to the root, or absolute) resolved through `..` and symlinks, refused when
    /// it leaves the root. A path that does not exist yet resolves through its existing ancestors.
    pub fn resolve(&self, path: &str) -> anyhow::Result<PathBuf> {
        let given = Path::new(path);
        let joined = if given.is_absolute() {
            given.to_path_buf()
        } else {
            self.root.join(given)
        };
        let mut cur = PathBuf::new();
        for c in joined.components() {
            match c {
                Component::Prefix(_) | Component::RootDir => cur.push(c.as_os_str()),
                Component::CurDir => {}
                Component::ParentDir => {
                    cur.pop();
                }
                Component::Normal(name) => {
                    cur.push(name);
                    if cur.symlink_metadata().is_ok() {
                        // Follows a symlink to where it really points; a dangling one is refused.
                        cur = cur.canonicalize().with_context(|| {
                            format!("{path}: cannot resolve (a broken symlink?)")
                        })?;
                    }
                }
            }
        }
        if !cur.starts_with(&self.root) {
            anyhow::bail!(
                "{path} is outside the project root {}; only files inside it can be used",
                self.root.display()
            );
        }
        Ok(cur)
    }

    /// `path` as the model should see it: relative to the root.
    pub fn relative(&self, path: &Path) -> String {
        let rel = path.strip_prefix(&self.root).unwrap_or(path);
        let s = rel.display().to_string();
        if s.is_empty() { ".".to_owned() } else { s }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn project(root: &Path) -> Project {
        let root = root.canonicalize().unwrap();
        Project {
            cwd: root.clone(),
            root,
            git_remote: None,
        }
    }

    #[test]
    fn dot_dot_and_symlinks_out_of_the_root_are_refused() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let p = project(dir.path());
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        assert!(p.resolve("sub/../a.txt").is_ok());
        assert!(p.resolve("new/dir/file.txt").is_ok());
        assert!(p.resolve("../x").is_err());
        assert!(p.resolve("sub/../../x").is_err());
        assert!(p.resolve("/etc/passwd").is_err());
        std::os::unix::fs::symlink(outside.path(), dir.path().join("link")).unwrap();
        assert!(p.resolve("link/secret").is_err());
        std::os::unix::fs::symlink(dir.path().join("sub"), dir.path().join("inner")).unwrap();
        assert!(p.resolve("inner/ok.txt").is_ok());
    }

    #[test]
    fn the_id_hashes_the_remote_else_the_root() {
        let mut p = project(Path::new("/"));
        p.git_remote = Some("git@example.com:a/b.git".into());
        assert_eq!(
            p.id(),
            hex::encode(Sha256::digest(b"git@example.com:a/b.git"))[..12]
        );
        p.git_remote = None;
        assert_eq!(p.id(), hex::encode(Sha256::digest(b"/"))[..12]);
    }
}
