//! The mock upstream over HTTPS, as the cloud providers serve: a self-signed certificate made at
//! start (its PEM written where Relay's `ca_file` reads it), ALPN offering `h2` and `http/1.1`,
//! and hyper's HTTP/1 and HTTP/2 server on each connection.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::service::TowerToHyperService;

/// Streams one HTTP/2 connection may carry at the mock: more than Relay puts on one (100), as
/// a provider's edge allows (RFC 9113 asks for at least 100).
const MAX_STREAMS: u32 = 250;

/// The address the certificate is for (an IP address name, so no lookup of `localhost` may try
/// `::1` first); Relay reaches the mock as `https://127.0.0.1:PORT`.
pub const HOST: &str = "127.0.0.1";

/// A TLS acceptor with a new self-signed certificate for `HOST`, whose PEM is written to `ca_pem`
/// for the client to trust.
pub fn acceptor(ca_pem: &Path) -> Result<tokio_rustls::TlsAcceptor> {
    let cert = rcgen::generate_simple_self_signed(vec![HOST.to_owned(), "localhost".to_owned()])
        .context("cannot make the mock's certificate")?;
    std::fs::write(ca_pem, cert.cert.pem())
        .with_context(|| format!("cannot write {}", ca_pem.display()))?;
    let key = rustls::pki_types::PrivateKeyDer::try_from(cert.signing_key.serialize_der())
        .map_err(|e| anyhow::anyhow!("the mock's key: {e}"))?;
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(vec![cert.cert.der().clone()], key)?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// Serves `router` over TLS on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    router: axum::Router,
) -> std::io::Result<()> {
    loop {
        let (tcp, _) = listener.accept().await?;
        let _ = tcp.set_nodelay(true);
        let (acceptor, router) = (acceptor.clone(), router.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(tcp).await else {
                return;
            };
            let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
            builder.http2().max_concurrent_streams(MAX_STREAMS);
            let _ = builder
                .serve_connection(TokioIo::new(tls), TowerToHyperService::new(router))
                .await;
        });
    }
}
