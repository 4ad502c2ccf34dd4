//! The connection server: accepts TCP connections and serves the router on each with hyper's
//! HTTP/1 and HTTP/2 connection builders, set up here instead of by `axum::serve`.
//!
//! `axum::serve` gives no access to hyper's per-connection settings. Every open leg holds one
//! connection for as long as it streams, so what a connection keeps allocated is most of what an
//! open stream costs (BENCHMARKS.md, "Memory per open stream").

use std::convert::Infallible;
use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tower::ServiceExt;

/// Serves `router` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish their requests (each is told to close once its current request is answered).
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let mut builder = Builder::new(TokioExecutor::new());
    configure(&mut builder);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    accept_failed(&e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // NDJSON lines are small writes spread over a leg: without TCP_NODELAY, Nagle's algorithm
        // holds a line back until the client acknowledges the previous one, which a delayed ACK
        // can stretch to 40 ms.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY");
        }
        let router = router.clone();
        let service = tower::service_fn(move |mut req: hyper::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(remote));
            let router = router.clone();
            async move {
                router
                    .oneshot(req.map(axum::body::Body::new))
                    .await
                    .map_err(|e: Infallible| match e {})
            }
        });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(tcp), TowerToHyperService::new(service))
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::trace!(error = %e, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// The most an HTTP/1 connection buffers while reading: hyper's lowest allowed cap, and so also
/// the largest request head (request line and headers) accepted; a bigger head is answered `431`
/// by hyper. With hyper's default cap (about 400 KiB) the read buffer of a connection grew to
/// 16 KiB while reading a leg's request and stayed so for as long as the leg streamed: `relay-bench
/// streams --count 3000` measured 46.8 KB per open stream with the default and 34.9 KB with this
/// (35.2 KB again; 47.0 KB with a 16 KiB cap). Relay's own headers are a bearer token and a few
/// short values; 8 KiB is what nginx allows a header line by default.
pub const MAX_REQUEST_HEAD: usize = 8 * 1024;

/// hyper's settings for every connection.
fn configure(builder: &mut Builder<TokioExecutor>) {
    builder.http1().max_buf_size(MAX_REQUEST_HEAD);
}

/// What a failed `accept` means: a connection that went away before it was accepted is nothing;
/// anything else (out of file descriptors, out of memory) is logged and waited out for a second,
/// as `axum::serve` does, instead of spinning.
async fn accept_failed(e: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "cannot accept a connection; retrying in a second");
    tokio::time::sleep(Duration::from_secs(1)).await;
}
