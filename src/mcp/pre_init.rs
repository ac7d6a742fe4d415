//! rmcp ends a session whose first message is a notification
//! (`ExpectedInitializeRequest`). Some clients send one early (a
//! `notifications/cancelled` for a request that never arrived, say); the
//! server must not die of it. This transport drops client notifications
//! until the first request has gone through.

use rmcp::RoleServer;
use rmcp::model::JsonRpcMessage;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;

pub struct DropEarlyNotifications<T> {
    inner: T,
    seen_request: bool,
}

impl<T> DropEarlyNotifications<T> {
    pub fn new(inner: T) -> Self {
        Self {
            inner,
            seen_request: false,
        }
    }
}

impl<T: Transport<RoleServer>> Transport<RoleServer> for DropEarlyNotifications<T> {
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.inner.send(item)
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let message = self.inner.receive().await?;
            match message {
                JsonRpcMessage::Notification(_) if !self.seen_request => {
                    tracing::info!("dropped a notification that came before the first request");
                }
                JsonRpcMessage::Request(_) => {
                    self.seen_request = true;
                    return Some(message);
                }
                other => return Some(other),
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}
