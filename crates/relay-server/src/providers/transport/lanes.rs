//! The HTTP clients one provider's legs go out on: HTTP/2 where the provider offers it over TLS
//! (OpenAI, Anthropic and Gemini do), with at most `streams_per_connection` legs on one connection.
//!
//! With HTTP/2 every open leg to a provider shares one connection instead of holding one of its
//! own, which is what makes an open stream cheap (one socket in Relay instead of two, no TLS
//! session or HTTP/1 buffers per leg). But reqwest (hyper-util's pool) keeps a single HTTP/2
//! connection per origin and queues requests past the server's `SETTINGS_MAX_CONCURRENT_STREAMS`,
//! and a leg can stay open for minutes: legs past that limit would wait for others to finish.
//! So the provider has several clients ("lanes"), each with its own pool and so its own
//! connection, and a leg takes the first lane with room; a new lane opens when all are full.
//! 100 streams a connection is the least RFC 9113 asks servers to allow. Plain `http://`
//! providers (llama.cpp, Ollama, vLLM) speak HTTP/1.1, one connection per open leg, on the
//! provider's own pool of connections instead (`providers::transport::plain`).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use super::plain::Pool;

/// How each lane's client is built: one TLS configuration, built once and shared by every lane
/// (and by every provider trusting the system's roots). Each lane's client takes a copy of it
/// that shares the certificate verifier, its root store and the session cache: built per client,
/// the system's trust store was read and kept again for every lane (1.6 MB of RSS each, measured).
#[derive(Clone)]
pub struct ClientSettings {
    tls: Arc<rustls::ClientConfig>,
}

impl ClientSettings {
    /// The platform's trust store (on Linux the system's CA bundle, `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR`), as reqwest uses by default.
    pub fn system() -> anyhow::Result<Self> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
            .map_err(|e| anyhow::anyhow!("cannot load the system's trust store: {e}"))?;
        let config = config_builder(provider)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(Self::from_config(config))
    }

    /// Reads the PEM file `path` (one or more certificates), for a provider behind a private CA:
    /// its certificates are the only roots trusted for that provider.
    pub fn with_ca_file(path: &std::path::Path) -> anyhow::Result<Self> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let pem = std::fs::read(path)
            .map_err(|e| anyhow::anyhow!("cannot read ca_file {}: {e}", path.display()))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|_| {
                anyhow::anyhow!("ca_file {}: a PEM block is not readable", path.display())
            })?;
            roots.add(cert).map_err(|e| {
                anyhow::anyhow!(
                    "ca_file {}: a certificate is not usable: {e}",
                    path.display()
                )
            })?;
        }
        if roots.is_empty() {
            anyhow::bail!("ca_file {}: no PEM certificate in it", path.display());
        }
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = config_builder(provider)?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Self::from_config(config))
    }

    /// HTTP/2 first, HTTP/1.1 for servers without it: reqwest sets this itself only on TLS
    /// configurations it builds.
    fn from_config(mut config: rustls::ClientConfig) -> Self {
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Self {
            tls: Arc::new(config),
        }
    }

    fn build(&self) -> anyhow::Result<reqwest::Client> {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .tcp_nodelay(true)
            .pool_idle_timeout(Duration::from_secs(90))
            // A shared connection that died silently would fail every leg on it: ping it.
            .http2_keep_alive_interval(Duration::from_secs(30))
            .http2_keep_alive_timeout(Duration::from_secs(10))
            .tls_backend_preconfigured(rustls::ClientConfig::clone(&self.tls))
            .build()
            .map_err(|e| anyhow::anyhow!("cannot build the HTTP client: {e}"))
    }
}

/// rustls' safe defaults with aws-lc-rs, the crypto reqwest itself is built with.
fn config_builder(
    provider: Arc<rustls::crypto::CryptoProvider>,
) -> anyhow::Result<rustls::ConfigBuilder<rustls::ClientConfig, rustls::WantsVerifier>> {
    rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| anyhow::anyhow!("TLS: {e}"))
}

/// One client and how many legs are on it now.
struct Lane {
    client: reqwest::Client,
    in_flight: Arc<AtomicUsize>,
}

/// A provider's lanes, and its plain-HTTP/1.1 connections.
pub struct Lanes {
    settings: ClientSettings,
    per_lane: usize,
    lanes: Mutex<Vec<Lane>>,
    plain: Arc<Pool>,
    /// `[routing] max_event_bytes`, for the legs' SSE framing.
    max_event_bytes: usize,
}

/// A leg's place on a lane, given back when the leg's upstream response is dropped.
#[derive(Debug)]
pub struct Lease {
    in_flight: Arc<AtomicUsize>,
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Lanes {
    /// The first lane is built now, so a bad TLS setting fails at start-up, not on a leg.
    pub fn new(settings: ClientSettings, per_lane: usize) -> anyhow::Result<Self> {
        let first = Lane {
            client: settings.build()?,
            in_flight: Arc::new(AtomicUsize::new(0)),
        };
        Ok(Self {
            settings,
            per_lane: per_lane.max(1),
            lanes: Mutex::new(vec![first]),
            plain: Arc::new(Pool::default()),
            max_event_bytes: crate::providers::sse::DEFAULT_MAX_EVENT_BYTES,
        })
    }

    /// The same lanes with SSE lines and events capped at `max` bytes.
    #[must_use]
    pub fn with_max_event_bytes(mut self, max: usize) -> Self {
        self.max_event_bytes = max;
        self
    }

    /// The most one SSE line or event of a leg's answer may hold.
    pub fn max_event_bytes(&self) -> usize {
        self.max_event_bytes
    }

    /// A client for one leg and its lease: the first lane with room (so legs pack onto few
    /// connections and idle lanes let theirs time out), else a new lane.
    pub fn lease(&self) -> anyhow::Result<(reqwest::Client, Lease)> {
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        let lane = match lanes
            .iter()
            .position(|l| l.in_flight.load(Ordering::Acquire) < self.per_lane)
        {
            Some(i) => &lanes[i],
            None => {
                lanes.push(Lane {
                    client: self.settings.build()?,
                    in_flight: Arc::new(AtomicUsize::new(0)),
                });
                &lanes[lanes.len() - 1]
            }
        };
        lane.in_flight.fetch_add(1, Ordering::AcqRel);
        Ok((
            lane.client.clone(),
            Lease {
                in_flight: lane.in_flight.clone(),
            },
        ))
    }

    /// The idle connections of a plain-`http://` provider.
    pub fn plain(&self) -> &Arc<Pool> {
        &self.plain
    }

    /// How many lanes there are (each at most one HTTP/2 connection per origin).
    pub fn count(&self) -> usize {
        self.lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn in_flight(lanes: &Lanes) -> Vec<usize> {
        lanes
            .lanes
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|l| l.in_flight.load(Ordering::Acquire))
            .collect()
    }

    #[test]
    fn legs_fill_a_lane_before_the_next_one_opens() {
        let lanes = Lanes::new(ClientSettings::system().unwrap(), 2).unwrap();
        let a = lanes.lease().unwrap().1;
        let b = lanes.lease().unwrap().1;
        assert_eq!(in_flight(&lanes), vec![2]);
        let c = lanes.lease().unwrap().1;
        assert_eq!(in_flight(&lanes), vec![2, 1]);
        drop((a, b, c));
        assert_eq!(in_flight(&lanes), vec![0, 0]);
    }

    #[test]
    fn a_freed_place_on_an_earlier_lane_is_taken_first() {
        let lanes = Lanes::new(ClientSettings::system().unwrap(), 2).unwrap();
        let a = lanes.lease().unwrap().1;
        let _b = lanes.lease().unwrap().1;
        let _c = lanes.lease().unwrap().1;
        drop(a);
        let _d = lanes.lease().unwrap().1;
        assert_eq!(in_flight(&lanes), vec![2, 1]);
        assert_eq!(lanes.count(), 2);
    }

    #[test]
    fn a_ca_file_without_certificates_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ca.pem");
        std::fs::write(&path, "not a certificate").unwrap();
        let err = ClientSettings::with_ca_file(&path).err().unwrap();
        assert!(err.to_string().contains("no PEM certificate"), "{err}");
        let missing = ClientSettings::with_ca_file(&dir.path().join("none.pem"))
            .err()
            .unwrap();
        assert!(
            missing.to_string().contains("cannot read ca_file"),
            "{missing}"
        );
    }
}
