//! Who is told that the tools a client sees changed (a downstream's tool
//! drifted from its pin and is hidden now, or came back to it): each
//! legacy session's client, with a notification on its session, and each
//! 2026-07-28 client that opened a `subscriptions/listen` stream for tool
//! changes. A watcher whose session or stream has ended is forgotten at
//! the next telling.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::RoleServer;
use rmcp::model::{ServerNotification, ToolListChangedNotification};
use rmcp::service::{Peer, SubscriptionSink};

#[derive(Default)]
struct Watching {
    sessions: Vec<Peer<RoleServer>>,
    streams: Vec<SubscriptionSink>,
}

#[derive(Clone, Default)]
pub struct ToolWatchers {
    watching: Arc<Mutex<Watching>>,
}

impl ToolWatchers {
    /// A legacy session's client, told on its session.
    pub fn session(&self, peer: Peer<RoleServer>) {
        self.lock().sessions.push(peer);
    }

    /// A 2026-07-28 client's stream of tool changes.
    pub fn stream(&self, sink: SubscriptionSink) {
        self.lock().streams.push(sink);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Watching> {
        self.watching.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells every watcher its tool list changed.
    pub async fn tell(&self) {
        let (sessions, streams) = {
            let watching = self.lock();
            (watching.sessions.clone(), watching.streams.clone())
        };
        let mut gone_sessions = Vec::new();
        for (at, peer) in sessions.iter().enumerate() {
            if peer.is_transport_closed() || peer.notify_tool_list_changed().await.is_err() {
                gone_sessions.push(at);
            }
        }
        let mut gone_streams = Vec::new();
        for (at, sink) in streams.iter().enumerate() {
            let told = sink
                .send(ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification {
                        method: Default::default(),
                        extensions: Default::default(),
                    },
                ))
                .await;
            if told.is_err() {
                gone_streams.push(at);
            }
        }
        let mut watching = self.lock();
        // Watchers added while telling stand after the ones told.
        for at in gone_sessions.into_iter().rev() {
            watching.sessions.remove(at);
        }
        for at in gone_streams.into_iter().rev() {
            watching.streams.remove(at);
        }
    }
}
