//! The standard `process_*` metrics (the names every Prometheus client library exports), read from
//! `/proc` on each scrape so they cost nothing between scrapes.
//!
//! A value that cannot be read (not Linux, a restricted `/proc`) is left out rather than reported
//! as zero, which would read as a real measurement.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// One scrape's reading of the process.
#[derive(Debug, Default)]
struct Reading {
    cpu_seconds: Option<f64>,
    resident_bytes: Option<f64>,
    virtual_bytes: Option<f64>,
    open_fds: Option<f64>,
    max_fds: Option<f64>,
    start_time_seconds: Option<f64>,
}

#[cfg(target_os = "linux")]
fn read() -> Reading {
    use procfs::process::{LimitValue, Process};
    let Ok(me) = Process::myself() else {
        return Reading::default();
    };
    let mut r = Reading::default();
    if let Ok(stat) = me.stat() {
        let ticks = procfs::ticks_per_second() as f64;
        r.cpu_seconds = Some((stat.utime + stat.stime) as f64 / ticks);
        r.resident_bytes = Some(stat.rss as f64 * procfs::page_size() as f64);
        r.virtual_bytes = Some(stat.vsize as f64);
        r.start_time_seconds = procfs::boot_time_secs()
            .ok()
            .map(|boot| boot as f64 + stat.starttime as f64 / ticks);
    }
    r.open_fds = me.fd_count().ok().map(|n| n as f64);
    r.max_fds = me
        .limits()
        .ok()
        .and_then(|l| match l.max_open_files.soft_limit {
            LimitValue::Value(n) => Some(n as f64),
            LimitValue::Unlimited => None,
        });
    r
}

#[cfg(not(target_os = "linux"))]
fn read() -> Reading {
    Reading::default()
}

/// Registered on the root registry, so its names carry no `relay_` prefix.
#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = read();
        if let Some(v) = r.cpu_seconds {
            let m = ConstCounter::new(v);
            m.encode(encoder.encode_descriptor(
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds.",
                None,
                m.metric_type(),
            )?)?;
        }
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                r.resident_bytes,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                r.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                r.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                r.max_fds,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                r.start_time_seconds,
            ),
        ];
        for (name, help, value) in gauges {
            if let Some(v) = value {
                let m = ConstGauge::new(v);
                m.encode(encoder.encode_descriptor(name, help, None, m.metric_type())?)?;
            }
        }
        Ok(())
    }
}
