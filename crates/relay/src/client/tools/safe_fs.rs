//! File access that cannot be steered by a symlink: writes walk from the project root one
//! component at a time through directory handles opened with `O_NOFOLLOW`, so a symlink anywhere
//! under the root (shipped by a cloned repository, or swapped in between a check and the write)
//! is refused instead of followed; a file is replaced atomically (a new file beside it, then a
//! rename), so a hard link or a half-written file never carries the change elsewhere. Reads open
//! with `O_NOFOLLOW | O_NONBLOCK`, accept regular files only and read no more than asked.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use anyhow::Context;
use rustix::fs::{AtFlags, CWD, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::client::project::Project;

/// Flags for a directory met on the way: never a symlink, never a terminal.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY
}

/// The components of `rel` (relative to the root), refusing `..`, absolute parts and an empty path:
/// every caller hands a path already confined, so anything else is a mistake to stop at.
fn parts<'a>(rel: &'a Path, shown: &str) -> anyhow::Result<Vec<&'a std::ffi::OsStr>> {
    let mut out = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            _ => anyhow::bail!("{shown}: the path must stay under the project root"),
        }
    }
    anyhow::ensure!(!out.is_empty(), "{shown}: not a file path");
    Ok(out)
}

/// What `name` in `dir` is, without following it; `None` when it does not exist.
fn kind_at(dir: &OwnedFd, name: &std::ffi::OsStr) -> std::io::Result<Option<(FileType, Mode)>> {
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some((
            FileType::from_raw_mode(st.st_mode),
            Mode::from_raw_mode(st.st_mode),
        ))),
        Err(Errno::NOENT) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn symlink_refusal(shown: &str, at: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "refused: {} is a symbolic link; {shown} is not written through a symlink (it could point \
         at any file, such as .git/config). Remove the link or choose another path",
        at.display()
    )
}

/// Opens (creating when missing) the directory `dirs` under `root`, one component at a time,
/// refusing any component that is a symlink or not a directory.
fn open_dirs(root: &Path, dirs: &[&std::ffi::OsStr], shown: &str) -> anyhow::Result<OwnedFd> {
    let mut fd = rustix::fs::openat(CWD, root, dir_flags(), Mode::empty())
        .with_context(|| format!("cannot open the project root {}", root.display()))?;
    let mut walked = std::path::PathBuf::new();
    for name in dirs {
        walked.push(name);
        match kind_at(&fd, name)? {
            None => match rustix::fs::mkdirat(&fd, *name, Mode::from_raw_mode(0o777)) {
                // Someone else made it in between: it is checked by the open below.
                Ok(()) | Err(Errno::EXIST) => {}
                Err(e) => {
                    return Err(anyhow::Error::from(std::io::Error::from(e))
                        .context(format!("cannot create {}", walked.display())));
                }
            },
            Some((FileType::Symlink, _)) => return Err(symlink_refusal(shown, &walked)),
            Some((FileType::Directory, _)) => {}
            Some(_) => anyhow::bail!("{}: exists and is not a directory", walked.display()),
        }
        // NOFOLLOW: a symlink swapped in since the check fails here (ELOOP/ENOTDIR).
        fd = rustix::fs::openat(&fd, *name, dir_flags(), Mode::empty()).map_err(|e| match e {
            Errno::LOOP | Errno::NOTDIR => symlink_refusal(shown, &walked),
            e => anyhow::Error::from(std::io::Error::from(e))
                .context(format!("cannot open {}", walked.display())),
        })?;
    }
    Ok(fd)
}

/// Writes `bytes` to `rel` under `root`: missing directories are created, a symlink at any level
/// (the file itself included) is refused, and an existing file is replaced atomically, keeping its
/// permission bits. `shown` names the path in messages as the model gave it.
pub fn write_beneath(root: &Path, rel: &Path, bytes: &[u8], shown: &str) -> anyhow::Result<()> {
    let parts = parts(rel, shown)?;
    let (file, dirs) = parts
        .split_last()
        .context("not a file path")
        .with_context(|| shown.to_owned())?;
    let dir = open_dirs(root, dirs, shown)?;
    let existing = match kind_at(&dir, file)? {
        None => None,
        Some((FileType::Symlink, _)) => return Err(symlink_refusal(shown, rel)),
        // Replacing by rename would get past a read-only file's bits; it stays refused, as a
        // write in place was.
        Some((FileType::RegularFile, mode)) if !mode.contains(Mode::WUSR) => {
            anyhow::bail!("{shown} is read-only; nothing was changed")
        }
        Some((FileType::RegularFile, mode)) => Some(mode),
        Some(_) => anyhow::bail!("{shown}: exists and is not a regular file"),
    };
    let (fd, tmp) = create_temp(&dir, file, shown)?;
    let written = (|| -> std::io::Result<()> {
        // A new file gets the umask's mode; a replaced one keeps its bits (an executable script
        // stays executable).
        if let Some(mode) = existing {
            rustix::fs::fchmod(&fd, mode)?;
        }
        let mut f = File::from(fd);
        f.write_all(bytes)?;
        f.sync_data()?;
        rustix::fs::renameat(&dir, tmp.as_str(), &dir, *file)?;
        Ok(())
    })();
    if let Err(e) = written {
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), AtFlags::empty());
        return Err(anyhow::Error::from(e).context(format!("cannot write {shown}")));
    }
    Ok(())
}

/// An approved write to `full`, already resolved and confined by `Project::resolve`: walked again
/// from the root without following links, so a symlink swapped in since cannot redirect it.
pub fn write_confined(
    project: &Project,
    full: &Path,
    bytes: &[u8],
    shown: &str,
) -> anyhow::Result<()> {
    let rel = full
        .strip_prefix(&project.root)
        .with_context(|| format!("{shown} is outside the project root"))?;
    write_beneath(&project.root, rel, bytes, shown)
}

/// A new file beside `file` in `dir`, created exclusively (never an existing file or a symlink).
fn create_temp(
    dir: &OwnedFd,
    file: &std::ffi::OsStr,
    shown: &str,
) -> anyhow::Result<(OwnedFd, String)> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    for attempt in 0..16u32 {
        let tmp = format!(
            ".{}.relay-{}-{nanos}-{attempt}.tmp",
            file.to_string_lossy(),
            std::process::id()
        );
        match rustix::fs::openat(
            dir,
            tmp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o666),
        ) {
            Ok(fd) => return Ok((fd, tmp)),
            Err(Errno::EXIST) => continue,
            Err(e) => {
                return Err(anyhow::Error::from(std::io::Error::from(e))
                    .context(format!("cannot write {shown}")));
            }
        }
    }
    anyhow::bail!("cannot write {shown}: no free name for its temporary file")
}

/// Opens `full` for reading: not through a symlink at its last component, not blocking on a FIFO or
/// device, regular files only. Returns the file and its size.
pub fn open_regular(full: &Path, shown: &str) -> anyhow::Result<(File, u64)> {
    let fd = rustix::fs::openat(
        CWD,
        full,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )
    .map_err(|e| match e {
        Errno::LOOP => anyhow::anyhow!("refused: {shown} changed into a symbolic link"),
        e => anyhow::Error::from(std::io::Error::from(e)).context(format!("cannot read {shown}")),
    })?;
    let file = File::from(fd);
    let meta = file
        .metadata()
        .with_context(|| format!("cannot read {shown}"))?;
    anyhow::ensure!(
        meta.is_file(),
        "{shown} is not a regular file (a directory, FIFO or device); use list_dir for a directory"
    );
    Ok((file, meta.len()))
}

/// Up to `cap` bytes from `file`, read with `take`, so a huge file costs no more memory than `cap`.
pub fn read_up_to(file: &mut File, cap: u64) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    Read::by_ref(file).take(cap).read_to_end(&mut buf)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (tempfile::TempDir, std::path::PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        (dir, root)
    }

    #[test]
    fn writes_create_directories_and_replace_files() {
        let (_d, root) = root();
        write_beneath(&root, Path::new("a/b/c.txt"), b"one", "a/b/c.txt").unwrap();
        write_beneath(&root, Path::new("a/b/c.txt"), b"two", "a/b/c.txt").unwrap();
        assert_eq!(std::fs::read(root.join("a/b/c.txt")).unwrap(), b"two");
        let left: Vec<_> = std::fs::read_dir(root.join("a/b")).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left behind");
    }

    #[test]
    fn a_symlink_at_any_level_is_refused_and_its_target_untouched() {
        let (_d, root) = root();
        std::fs::write(root.join("target.txt"), "keep").unwrap();
        std::fs::create_dir(root.join("real")).unwrap();
        std::os::unix::fs::symlink("target.txt", root.join("file-link")).unwrap();
        std::os::unix::fs::symlink("real", root.join("dir-link")).unwrap();
        for rel in ["file-link", "dir-link/x.txt"] {
            let e = write_beneath(&root, Path::new(rel), b"evil", rel).unwrap_err();
            assert!(format!("{e:#}").contains("symbolic link"), "{e:#}");
        }
        assert_eq!(std::fs::read(root.join("target.txt")).unwrap(), b"keep");
        assert!(!root.join("real/x.txt").exists());
        assert!(write_beneath(&root, Path::new("../x"), b"", "../x").is_err());
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_read_only_one_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let (_d, root) = root();
        let script = root.join("run.sh");
        std::fs::write(&script, "old").unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
        write_beneath(&root, Path::new("run.sh"), b"new", "run.sh").unwrap();
        let mode = std::fs::metadata(&script).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750);
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = write_beneath(&root, Path::new("run.sh"), b"x", "run.sh").unwrap_err();
        assert!(format!("{e:#}").contains("read-only"), "{e:#}");
        assert_eq!(std::fs::read(&script).unwrap(), b"new");
    }

    #[test]
    fn reads_refuse_symlinks_and_non_files_and_stop_at_the_cap() {
        let (_d, root) = root();
        std::fs::write(root.join("f"), "0123456789").unwrap();
        std::os::unix::fs::symlink("f", root.join("l")).unwrap();
        assert!(open_regular(&root.join("l"), "l").is_err());
        assert!(open_regular(&root, ".").is_err());
        let (mut f, len) = open_regular(&root.join("f"), "f").unwrap();
        assert_eq!(len, 10);
        assert_eq!(read_up_to(&mut f, 4).unwrap(), b"0123");
    }
}
