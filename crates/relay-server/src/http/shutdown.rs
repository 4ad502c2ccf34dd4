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
            // twice does not mean to wait out the grace period. Its listener is in place before
            // the line that invites it is logged, so a ctrl-c pressed on seeing it is not missed
            // (with nothing open the server usually ends first, and the line is not logged).
            let second = second_interrupt();
            tracing::info!(
                grace_ms = grace.as_millis() as u64,
                "requests still open: ctrl-c again to stop at once instead of waiting for them"
            );
            tokio::select! {
                () = tokio::time::sleep(grace) => {}
                () = second => {
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

/// Resolves at the next ctrl-c (SIGINT) after this call; never where it cannot be listened for.
/// The listener is registered here, not when the future is first polled.
#[cfg(unix)]
fn second_interrupt() -> impl Future<Output = ()> + Send {
    use tokio::signal::unix::{SignalKind, signal};
    let listener = signal(SignalKind::interrupt()).ok();
    async move {
        match listener {
            Some(mut signal) => {
                signal.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    }
}

/// Resolves at the next ctrl-c; never where it cannot be listened for.
#[cfg(not(unix))]
fn second_interrupt() -> impl Future<Output = ()> + Send {
    async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}
