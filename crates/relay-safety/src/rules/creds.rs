//! Credential rules: deleting credential folders, and credential files leaving over the network
//! (uploads, copies to a host, redirections and pipes into network clients).

use super::super::args::{Arg, plain_args};
use super::super::parser::{Cmd, Redir, RedirOp};
use super::super::reason::{CREDENTIAL_DELETE, CREDENTIAL_EXFIL};
use super::super::resolve::resolve;
use super::super::walk::Walker;
use super::fs::components;

/// Folders under a home directory that hold credentials (`.config/gcloud` is two components).
const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".aws",
    ".gnupg",
    ".kube",
    ".azure",
    ".docker",
    ".password-store",
    ".config/gcloud",
];

/// Files under a home directory that hold credentials.
const CREDENTIAL_FILES: &[&str] = &[
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".vault-token",
];

/// Credential files outside any home directory.
const SYSTEM_CREDENTIALS: &[&str] = &["etc/shadow", "etc/gshadow"];

/// The path below a home directory (`~`, `~user`, `$HOME`, `${HOME}`, `/home/u`, `/Users/u`,
/// `/root`), as components.
fn under_home(v: &str) -> Option<Vec<&str>> {
    let rest = if let Some(r) = v.strip_prefix('~') {
        r.find('/').map_or("", |p| &r[p..])
    } else if let Some(r) = v
        .strip_prefix("${HOME}")
        .or_else(|| v.strip_prefix("$HOME"))
    {
        r
    } else if v.starts_with('/') {
        let (comps, _) = components(v);
        let skip = match comps.first() {
            Some(&"home" | &"Users") => 2,
            Some(&"root") => 1,
            _ => return None,
        };
        return (comps.len() >= skip).then(|| comps[skip..].to_vec());
    } else {
        return None;
    };
    Some(components(rest).0)
}

/// Whether a path names credentials: a credential folder (or anything in it, or a glob that may
/// match one), a credential file, `/etc/shadow`. Public keys and `known_hosts` are not secret.
pub(crate) fn credential_path(v: &str) -> bool {
    let (abs, _) = components(v);
    if v.starts_with('/') && SYSTEM_CREDENTIALS.contains(&abs.join("/").as_str()) {
        return true;
    }
    let Some(comps) = under_home(v) else {
        return false;
    };
    let Some(first) = comps.first() else {
        return false;
    };
    let last = comps.last().copied().unwrap_or_default();
    if last.ends_with(".pub") || last.starts_with("known_hosts") {
        return false;
    }
    let joined = comps.join("/");
    let in_dir = CREDENTIAL_DIRS
        .iter()
        .any(|d| joined == *d || joined.starts_with(&format!("{d}/")));
    let glob_dot = first.starts_with('.') && first.contains(['*', '?', '[']);
    in_dir || glob_dot || CREDENTIAL_FILES.contains(&joined.as_str())
}

/// Whether any piece of `v` (split where a path can start inside a word: `@file`, `name=@file`,
/// `--opt=file`, `FILE:path`, `$(cat path)`) names credentials.
pub(crate) fn mentions_credentials(v: &str) -> bool {
    v.split([
        ' ', '@', '=', '<', ':', '(', ')', '"', '\'', ';', ',', '\t', '`',
    ])
    .any(credential_path)
}

fn is_network_client(n: &str) -> bool {
    matches!(
        n,
        "curl"
            | "wget"
            | "wget2"
            | "nc"
            | "ncat"
            | "netcat"
            | "nc.traditional"
            | "nc.openbsd"
            | "socat"
            | "telnet"
            | "ssh"
            | "scp"
            | "sftp"
            | "rsync"
            | "ftp"
            | "lftp"
            | "openssl"
            | "http"
            | "https"
            | "xh"
            | "aws"
            | "gsutil"
            | "rclone"
            | "mail"
            | "mailx"
            | "sendmail"
    )
}

/// Whether a command reads credentials: names them in an argument or reads one through `<`.
pub(crate) fn cmd_reads_credentials(c: &Cmd) -> bool {
    match c {
        Cmd::Simple { words, redirs } => {
            plain_args(words)
                .iter()
                .any(|a| mentions_credentials(&a.value))
                || reads_credentials(redirs)
        }
        Cmd::Compound { body, redirs } => {
            body.iter().flatten().any(cmd_reads_credentials) || reads_credentials(redirs)
        }
        Cmd::Function { .. } => false,
    }
}

/// Whether a command runs a network client (through any wrapper).
pub(crate) fn cmd_is_network_client(c: &Cmd) -> bool {
    match c {
        Cmd::Simple { words, .. } => resolve(&plain_args(words))
            .chain
            .iter()
            .any(|(n, _)| is_network_client(n)),
        Cmd::Compound { body, .. } => body.iter().flatten().any(cmd_is_network_client),
        Cmd::Function { .. } => false,
    }
}

fn reads_credentials(redirs: &[Redir]) -> bool {
    redirs
        .iter()
        .any(|r| r.op == RedirOp::Read && credential_path(&r.target.value))
}

impl Walker {
    /// `rm`, `shred`, `unlink`, ... of a credential folder or file.
    pub(super) fn credential_delete(&mut self, args: &[Arg<'_>]) {
        let hit = args
            .iter()
            .any(|a| !a.value.starts_with('-') && credential_path(&a.value));
        self.refuse_if(hit, CREDENTIAL_DELETE);
    }

    /// A network client given a credential file to send: `curl -T`/`-d @`/`-F f=@`, `scp` or
    /// `rsync` of one, `nc host < file`. Options that only use a key locally (`ssh -i`,
    /// `scp -i`, `curl --cert`) are not sends.
    pub(crate) fn credential_send(&mut self, name: &str, args: &[Arg<'_>], redirs: &[Redir]) {
        if !is_network_client(name) {
            return;
        }
        let local_use: &[&str] = match name {
            "scp" | "sftp" => &["-i", "-F", "-o", "-P", "-S", "-J", "-c", "-l", "-D"],
            "rsync" => &["-e", "--rsh"],
            "curl" => &[
                "-E",
                "--cert",
                "--key",
                "--cacert",
                "--netrc-file",
                "-K",
                "--config",
            ],
            _ => &[],
        };
        // `scp`/`rsync` name local files whole (`host:path` is a remote one, fetched here).
        let copies = matches!(name, "scp" | "sftp" | "rsync");
        let mut sent = reads_credentials(redirs);
        let mut i = 0;
        while let Some(a) = args.get(i) {
            let v = a.value.as_str();
            if local_use.contains(&v) {
                i += 2;
                continue;
            }
            let glued_local = local_use
                .iter()
                .any(|o| v.len() > o.len() && v.starts_with(o) && !o.starts_with("--"));
            // ssh reads its key for itself; only its redirections send anything.
            let names_one = if copies {
                !v.starts_with('-') && credential_path(v)
            } else {
                name != "ssh" && mentions_credentials(v)
            };
            sent |= names_one && !glued_local;
            i += 1;
        }
        self.refuse_if(sent, CREDENTIAL_EXFIL);
    }
}
