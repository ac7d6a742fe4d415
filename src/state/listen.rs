//! `LISTEN` on a channel of the shared database: a connection of its own
//! whose notifications come out as their payloads, until it breaks. The
//! clients' directory and the bridge's cancels each hold one.

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;

use super::{SharedState, StateError};

/// A channel listened to; the connection goes when this is dropped.
pub struct Listening {
    /// Each notification's payload; closed when the connection breaks.
    pub heard: mpsc::UnboundedReceiver<String>,
    /// Kept so the connection stays open.
    _client: tokio_postgres::Client,
    driving: JoinHandle<()>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.driving.abort();
    }
}

/// Listens on `channel` (a name of this crate's, not a user's: it is part
/// of the statement) from when this returns.
pub async fn listen(state: &SharedState, channel: &str) -> Result<Listening, StateError> {
    let (client, mut connection) = state.dedicated().await?;
    let (sender, heard) = mpsc::unbounded_channel();
    let driving = tokio::spawn(async move {
        loop {
            match std::future::poll_fn(|cx| connection.poll_message(cx)).await {
                Some(Ok(AsyncMessage::Notification(notification))) => {
                    if sender.send(notification.payload().to_owned()).is_err() {
                        return;
                    }
                }
                Some(Ok(_)) => {}
                Some(Err(err)) => {
                    tracing::warn!(error = %err, "a connection listening for notifications failed");
                    return;
                }
                None => return,
            }
        }
    });
    client.batch_execute(&format!("LISTEN {channel}")).await?;
    Ok(Listening {
        heard,
        _client: client,
        driving,
    })
}
