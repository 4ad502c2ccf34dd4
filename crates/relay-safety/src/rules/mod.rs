//! The per-program rules, picked by the name of the program a command resolves to.

mod creds;
mod fs;
mod git;
mod interp;
mod net;
mod system;

use super::args::Arg;
use super::reason::{
    DEVICE_TOOL, DEVICE_WRITE, HELM_UNINSTALL, INFRA_DESTROY, KILL_ALL, KUBE_DELETE, POWER,
    REVERSE_SHELL, SQL, SYSTEM_FILE_WRITE,
};
use super::walk::Walker;

pub(super) use creds::{cmd_is_network_client, cmd_reads_credentials};
pub(super) use fs::{device_write, system_file};
pub(super) use net::{
    cmd_has_downloader, cmd_is_interpreter, cmd_reads_stdin_shell, feeds_interpreter,
    redirs_have_downloader, script_has_downloader,
};

fn long_matches(v: &str, full: &str, min: usize) -> bool {
    v.len() >= min && full.starts_with(v)
}

/// The letters of a single-dash option cluster (`-xdf` -> `xdf`).
fn short_cluster(v: &str) -> Option<&[u8]> {
    let b = v.as_bytes();
    (b.len() > 1 && b[0] == b'-' && b[1] != b'-').then(|| &b[1..])
}

/// Whether a cluster has `flag` before any option in `valued` (whose value ends the cluster).
fn cluster_has(v: &str, flag: u8, valued: &[u8]) -> bool {
    let Some(cluster) = short_cluster(v) else {
        return false;
    };
    for &c in cluster {
        if c == flag {
            return true;
        }
        if valued.contains(&c) {
            return false;
        }
    }
    false
}

fn positionals<'x, 'a>(args: &'x [Arg<'a>]) -> impl Iterator<Item = &'x Arg<'a>> {
    args.iter().filter(|a| !a.value.starts_with('-'))
}

impl Walker {
    pub(super) fn rules(
        &mut self,
        name: &str,
        args: &[Arg<'_>],
        depth: usize,
        skip: &mut Vec<usize>,
    ) {
        let any_value = |words: &[&str]| args.iter().any(|a| words.contains(&a.value.as_str()));
        match name {
            "rm" => {
                self.rm(args);
                self.credential_delete(args);
            }
            "unlink" | "rmdir" | "srm" | "wipe" | "trash" | "trash-put" => {
                self.credential_delete(args)
            }
            "dd" => {
                let bad = args.iter().any(|a| {
                    a.value.strip_prefix("of=").is_some_and(|t| {
                        t.starts_with('$') || t.starts_with('`') || device_write(t)
                    })
                });
                if bad {
                    self.refuse(DEVICE_WRITE);
                }
            }
            n if n.starts_with("mkfs") || n == "mke2fs" || n == "wipefs" => {
                self.refuse(DEVICE_TOOL)
            }
            "mkswap" | "shred" | "blkdiscard" => {
                self.refuse_if(args.iter().any(|a| device_write(&a.value)), DEVICE_TOOL);
                self.credential_delete(args);
            }
            "fdisk" | "sfdisk" | "cfdisk" | "gdisk" | "sgdisk" | "cgdisk" | "parted" => {
                let listing = any_value(&["-l", "--list", "-d", "--dump"]);
                if !listing && args.iter().any(|a| device_write(&a.value)) {
                    self.refuse(DEVICE_TOOL);
                }
            }
            "tee" => {
                self.refuse_if(
                    positionals(args).any(|a| device_write(&a.value)),
                    DEVICE_WRITE,
                );
                self.refuse_if(
                    positionals(args).any(|a| system_file(&a.value)),
                    SYSTEM_FILE_WRITE,
                );
            }
            "cp" | "mv" | "install" => {
                self.refuse_if(
                    positionals(args)
                        .last()
                        .is_some_and(|a| device_write(&a.value)),
                    DEVICE_WRITE,
                );
                if name == "mv" {
                    self.mv(args);
                }
            }
            "chmod" | "chown" | "chgrp" => self.perms(name == "chmod", args),
            "git" => self.git(args, depth, skip),
            "terraform" | "tofu" | "terragrunt" => {
                let destroy_flag = args.iter().any(|a| {
                    let v = a.value.as_str();
                    matches!(
                        v,
                        "-destroy" | "--destroy" | "-destroy=true" | "--destroy=true"
                    )
                });
                if any_value(&["destroy"]) || (any_value(&["apply"]) && destroy_flag) {
                    self.refuse(INFRA_DESTROY);
                }
            }
            "pulumi" => self.refuse_if(any_value(&["destroy", "down"]), INFRA_DESTROY),
            "cdk" | "cdktf" => self.refuse_if(any_value(&["destroy"]), INFRA_DESTROY),
            "kubectl" | "oc" => self.refuse_if(any_value(&["delete"]), KUBE_DELETE),
            "helm" => self.refuse_if(
                any_value(&["uninstall", "delete", "del", "un"]),
                HELM_UNINSTALL,
            ),
            "shutdown" | "reboot" | "halt" | "poweroff" => self.refuse(POWER),
            "init" | "telinit" => self.refuse_if(any_value(&["0", "6"]), POWER),
            "systemctl" | "loginctl" => {
                self.refuse_if(
                    any_value(&["poweroff", "reboot", "halt", "kexec", "soft-reboot"]),
                    POWER,
                );
                self.firewall_service(args);
            }
            "crontab" | "iptables" | "ip6tables" | "iptables-legacy" | "ip6tables-legacy"
            | "iptables-nft" | "ip6tables-nft" | "ebtables" | "arptables" | "nft" | "ufw" => {
                self.system(name, args)
            }
            n if interp::language(n).is_some() => self.one_liner(n, args, depth),
            "killall5" => self.refuse(KILL_ALL),
            "kill" => self.kill(args),
            "find" => self.find(args, depth, skip),
            "dropdb" => self.refuse(SQL),
            "nc" | "ncat" | "netcat" | "nc.traditional" | "nc.openbsd" => {
                let exec = args.iter().any(|a| {
                    matches!(a.value.as_str(), "--exec" | "--sh-exec" | "--lua-exec")
                        || a.value.starts_with("--exec=")
                        || a.value.starts_with("--sh-exec=")
                        || cluster_has(&a.value, b'e', b"pswiqTVIOX")
                        || cluster_has(&a.value, b'c', b"pswiqTVIOX")
                });
                self.refuse_if(exec, REVERSE_SHELL);
            }
            _ => {}
        }
    }

    fn kill(&mut self, args: &[Arg<'_>]) {
        let mut i = 0;
        if let Some(first) = args.first() {
            let v = first.value.as_str();
            if matches!(v, "-l" | "-L" | "--list" | "--table") {
                return;
            }
            if matches!(v, "-s" | "-n" | "--signal") {
                i = 2;
            } else if v.starts_with('-') && v != "--" {
                i = 1;
            }
        }
        if args.get(i).is_some_and(|a| a.value == "--") {
            i += 1;
        }
        if args
            .get(i..)
            .unwrap_or_default()
            .iter()
            .any(|a| a.value == "-1")
        {
            self.refuse(KILL_ALL);
        }
    }
}
