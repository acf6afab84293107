//! The accept loop. `axum::serve` cannot give hyper a timer, and hyper enforces its
//! header-read timeout only with one, so a client that sends its request headers a byte at a
//! time could hold a connection (and a slot of the concurrency limit) for ever. This loop is
//! axum's with the timer and the timeout set: each connection is served by hyper's HTTP/1 and
//! HTTP/2 builder, handlers get the peer's address as `ConnectInfo<SocketAddr>`, and on the
//! shutdown signal the listener closes and connections finish the request in flight.

use std::future::Future;
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;

/// How long a client may take to send a request's headers before its connection is closed.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` resolves, then waits for open connections to
/// finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    header_timeout: Duration,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let (signal_tx, signal_rx) = watch::channel(());
    let (close_tx, close_rx) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    // Out of file descriptors and the like: wait a little, do not spin.
                    tracing::warn!(%error, "could not accept a connection");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let service = tower::service_fn(move |mut request: axum::http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(remote));
            app.clone().oneshot(request.map(axum::body::Body::new))
        });
        let (mut signal, close) = (signal_rx.clone(), close_rx.clone());
        tokio::spawn(async move {
            let mut builder = Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let connection = builder
                .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
            let mut connection = std::pin::pin!(connection);
            let mut signalled = false;
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(error) = result {
                            tracing::debug!(%error, %remote, "connection ended");
                        }
                        break;
                    }
                    _ = signal.changed(), if !signalled => {
                        signalled = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
            drop(close);
        });
    }
    drop(listener);
    let _ = signal_tx.send(());
    drop(close_rx);
    close_tx.closed().await;
    Ok(())
}
