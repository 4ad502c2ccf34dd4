//! Bounded graceful shutdown (issue 12.10): after the signal, in-flight requests get
//! `shutdown_grace_ms` to finish; then every open leg ends with one `error` line
//! (`retryable: true`, so the client retries elsewhere) and the server stops.

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::http::app::Relay;

/// How long legs get to write their last line once told to stop; anything still open after it is cut.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// Serves `relay` on `listener` until `shutdown` resolves, then drains for at most the grace period.
pub async fn serve_bounded(
    relay: &Relay,
    listener: tokio::net::TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let state = relay.state().clone();
    let grace = Duration::from_millis(state.config().shutdown_grace_ms);
    let signalled = CancellationToken::new();
    let on_signal = signalled.clone();
    let server = crate::http::server::serve(listener, relay.router(), async move {
        shutdown.await;
        on_signal.cancel();
    });
    tokio::pin!(server);
    tokio::select! {
        result = &mut server => return result,
        () = async {
            signalled.cancelled().await;
            // A second ctrl-c ends the drain at once (issue 42): an operator who pressed it
            // twice does not mean to wait out the grace period.
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                Ok(()) = tokio::signal::ctrl_c() => {
                    tracing::warn!("second ctrl-c: not waiting for the drain");
                }
            }
        } => {}
    }
    tracing::warn!(
        grace_ms = grace.as_millis() as u64,
        "shutdown grace period over: ending open legs"
    );
    state.stop_legs();
    match tokio::time::timeout(LAST_WORDS, &mut server).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!("requests still open after the grace period were cut off");
            Ok(())
        }
    }
}
