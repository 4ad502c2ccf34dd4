//! What the kernel says about a process and the machine: resident memory, CPU time, the open-file
//! limit, the load average. Linux only, read from `/proc`.

use std::collections::HashMap;

use anyhow::{Context, Result};

/// Resident set size (`VmRSS`) of `pid`, in KiB.
pub fn rss_kib(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("cannot read /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("no VmRSS in /proc/{pid}/status"))
}

/// The fields of `/proc/PID/stat` after the command name (which may hold spaces and parentheses).
fn stat_fields(pid: u32) -> Result<Vec<String>> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("cannot read /proc/{pid}/stat"))?;
    let rest = stat
        .rsplit_once(')')
        .map(|(_, r)| r)
        .with_context(|| format!("malformed /proc/{pid}/stat"))?;
    Ok(rest.split_whitespace().map(str::to_owned).collect())
}

/// User plus system CPU time of `pid`, in clock ticks. Fields 14 and 15 of stat; the slice starts at
/// field 3, the state.
pub fn cpu_ticks(pid: u32) -> Result<u64> {
    let f = stat_fields(pid)?;
    let get = |i: usize| -> Result<u64> {
        f.get(i)
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("malformed /proc/{pid}/stat"))
    };
    Ok(get(11)? + get(12)?)
}

/// `pid` and every process descended from it (LiteLLM runs its workers as children).
pub fn tree(pid: u32) -> Vec<u32> {
    let mut parent_of: HashMap<u32, u32> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(p) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            if let Ok(f) = stat_fields(p)
                && let Some(ppid) = f.get(1).and_then(|v| v.parse().ok())
            {
                parent_of.insert(p, ppid);
            }
        }
    }
    let mut out = vec![pid];
    let mut i = 0;
    while let Some(&p) = out.get(i) {
        out.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| **pp == p)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    out
}

/// CPU ticks of `pid` and its descendants (a process that exits in between is skipped).
pub fn tree_cpu_ticks(pid: u32) -> u64 {
    tree(pid)
        .into_iter()
        .filter_map(|p| cpu_ticks(p).ok())
        .sum()
}

/// RSS of `pid` and its descendants, in KiB.
pub fn tree_rss_kib(pid: u32) -> u64 {
    tree(pid).into_iter().filter_map(|p| rss_kib(p).ok()).sum()
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on every Linux seen).
pub fn clk_tck() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

/// The soft `Max open files` limit of this process (children inherit it).
pub fn nofile_soft() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The soft `Max open files` limit of `pid`, and how many descriptors it has open now.
pub fn nofile_of(pid: u32) -> Option<(u64, u64)> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    let soft = line.split_whitespace().nth(3)?.parse().ok()?;
    let open = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count();
    Some((soft, u64::try_from(open).ok()?))
}

/// CPU ticks of each process whose command line contains `needle`, by pid: a PostgreSQL server
/// titles each backend with its database's name, so this is the database work done for one
/// database.
pub fn matching_cpu_ticks(needle: &str) -> HashMap<u32, u64> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .filter_map(|pid| Some((pid, cpu_ticks(pid).ok()?)))
        .collect()
}

/// The ticks the processes of `after` used since `before`, each against its own earlier reading
/// (all of a process that started in between). A sum over the two whole sets would lose the whole
/// history of a backend that exited in between, and a pool that closed one connection then read
/// as no work at all (a run's PostgreSQL CPU at its highest rate came out 0.000 ms a leg).
pub fn ticks_since(before: &HashMap<u32, u64>, after: &HashMap<u32, u64>) -> u64 {
    after
        .iter()
        .map(|(pid, a)| a.saturating_sub(before.get(pid).copied().unwrap_or(0)))
        .sum()
}

/// The 1, 5 and 15 minute load averages.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// The 1-minute load average as a number.
pub fn load1() -> f64 {
    loadavg()
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

/// One line describing the machine: CPU model, cores, memory, kernel.
pub fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        .unwrap_or_else(|| "unknown CPU".into());
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<f64>().ok())
        })
        .map_or(0.0, |kib| kib / 1024.0 / 1024.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    format!("{model}, {cores} cores, {mem_gib:.0} GiB RAM, Linux {kernel}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(rss_kib(me).unwrap() > 0);
        cpu_ticks(me).unwrap();
        assert!(tree(me).contains(&me));
        assert!(nofile_soft().unwrap() > 0);
        let (soft, open) = nofile_of(me).unwrap();
        assert!(soft > 0 && open > 0);
        assert!(matching_cpu_ticks("no process is called this 7f3a").is_empty());
    }

    #[test]
    fn a_process_that_exited_in_between_does_not_cancel_the_others() {
        let before = HashMap::from([(10, 500), (11, 900)]);
        // 11 exited, 10 used 40 ticks, 12 started and used 7.
        let after = HashMap::from([(10, 540), (12, 7)]);
        assert_eq!(ticks_since(&before, &after), 47);
    }
}
