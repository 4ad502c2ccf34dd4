//! System administration rules: removing every cron job, flushing or disabling the firewall.

use super::super::args::Arg;
use super::super::reason::{CRONTAB_REMOVE, FIREWALL};
use super::super::walk::Walker;
use super::{positionals, short_cluster};

/// Firewall services whose stop, disable or mask opens the machine up.
const FIREWALL_UNITS: &[&str] = &["firewalld", "ufw", "nftables", "iptables", "ip6tables"];

impl Walker {
    pub(super) fn system(&mut self, name: &str, args: &[Arg<'_>]) {
        let words: Vec<&str> = positionals(args).map(|a| a.value.as_str()).collect();
        match name {
            // `-r` removes the whole table, with or without `-i` asking first.
            "crontab" => self.refuse_if(
                args.iter()
                    .any(|a| short_cluster(&a.value).is_some_and(|c| c.contains(&b'r'))),
                CRONTAB_REMOVE,
            ),
            // Flushing rules or deleting chains drops every filter at once.
            "nft" => {
                let flush = words.contains(&"flush");
                let delete = words
                    .windows(2)
                    .any(|w| w[0] == "delete" && matches!(w[1], "table" | "chain" | "ruleset"));
                self.refuse_if(flush || delete, FIREWALL);
            }
            "ufw" => self.refuse_if(
                words.iter().any(|w| matches!(*w, "disable" | "reset")),
                FIREWALL,
            ),
            _ => {
                let flush = args.iter().any(|a| {
                    let v = a.value.as_str();
                    matches!(v, "--flush" | "--delete-chain")
                        || v.starts_with("--flush=")
                        || (v.starts_with('-')
                            && !v.starts_with("--")
                            && v.len() == 2
                            && matches!(v.as_bytes().get(1), Some(b'F' | b'X')))
                });
                self.refuse_if(flush, FIREWALL);
            }
        }
    }

    /// `systemctl stop|disable|mask firewalld` and the like.
    pub(super) fn firewall_service(&mut self, args: &[Arg<'_>]) {
        let words: Vec<&str> = positionals(args).map(|a| a.value.as_str()).collect();
        let verb = words
            .iter()
            .any(|w| matches!(*w, "stop" | "disable" | "mask" | "kill"));
        let unit = words.iter().any(|w| {
            let base = w.strip_suffix(".service").unwrap_or(w);
            FIREWALL_UNITS.contains(&base)
        });
        self.refuse_if(verb && unit, FIREWALL);
    }
}
