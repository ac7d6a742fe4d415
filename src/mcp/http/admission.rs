//! Which connections the HTTP server keeps, before any request is read: a
//! peer that opens sockets and sends nothing (or half a request head) must
//! not starve the clients, the audit log or the reload watcher of file
//! descriptors. A connection is admitted only under a cap (total, and per
//! peer address), must finish its first request head within a deadline,
//! and is closed after a spell with no byte either way; one past a cap is
//! answered 503 at once and closed.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};

/// The bounds a connection lives within.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Connections open at once, from everyone.
    pub total: usize,
    /// Connections open at once from one peer address.
    pub per_peer: usize,
    /// How long a connection may take to send its first request head.
    pub head: Duration,
    /// How long a connection may go without a byte either way (a streamed
    /// answer sends keep-alive events, so it is never idle this long).
    pub idle: Duration,
}

/// File descriptors kept back from connections for the audit log, the
/// reload watcher, the session store and the downstream servers.
const RESERVED_FILES: usize = 128;

impl ConnectionLimits {
    /// The defaults, with the total held under what the process may open.
    pub fn within(open_files: u64, total: usize, per_peer: usize) -> Self {
        let room = usize::try_from(open_files)
            .unwrap_or(usize::MAX)
            .saturating_sub(RESERVED_FILES)
            .max(1);
        Self {
            total: total.min(room),
            per_peer: per_peer.min(total).max(1),
            head: Duration::from_secs(10),
            idle: Duration::from_secs(120),
        }
    }
}

/// Raises the soft limit on open files to the hard limit, and returns the
/// limit in force.
pub fn raise_open_files() -> u64 {
    use rustix::process::{Resource, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let (Some(soft), Some(hard)) = (limit.current, limit.maximum) else {
        return limit.current.unwrap_or(u64::MAX);
    };
    if soft < hard {
        let raised = rustix::process::Rlimit {
            current: Some(hard),
            maximum: Some(hard),
        };
        if setrlimit(Resource::Nofile, raised).is_ok() {
            return hard;
        }
    }
    soft
}

#[derive(Default)]
struct Counts {
    total: usize,
    by_peer: HashMap<IpAddr, usize>,
}

/// The connections open now; each admitted one holds a [`Slot`].
#[derive(Clone)]
struct Tally {
    limits: ConnectionLimits,
    counts: Arc<Mutex<Counts>>,
}

/// One admitted connection's place under the caps, given back on drop.
pub struct Slot {
    peer: IpAddr,
    counts: Arc<Mutex<Counts>>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        if let Some(n) = counts.by_peer.get_mut(&self.peer) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.by_peer.remove(&self.peer);
            }
        }
    }
}

impl Tally {
    fn admit(&self, peer: IpAddr) -> Option<Slot> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let from_peer = counts.by_peer.get(&peer).copied().unwrap_or(0);
        if counts.total >= self.limits.total || from_peer >= self.limits.per_peer {
            return None;
        }
        counts.total += 1;
        *counts.by_peer.entry(peer).or_insert(0) += 1;
        Some(Slot {
            peer,
            counts: Arc::clone(&self.counts),
        })
    }
}

/// The answer to a connection past a cap.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\nconnection: close\r\ncontent-length: 45\r\n\r\nportcullis: too many connections; try again\n";

/// The listener `axum::serve` reads: it admits connections under the
/// caps and hands on each wrapped in its deadlines.
pub struct AdmittingListener {
    listener: TcpListener,
    tally: Tally,
}

impl AdmittingListener {
    pub fn new(listener: TcpListener, limits: ConnectionLimits) -> Self {
        Self {
            listener,
            tally: Tally {
                limits,
                counts: Arc::default(),
            },
        }
    }
}

impl axum::serve::Listener for AdmittingListener {
    type Io = Watched;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, peer) = match self.listener.accept().await {
                Ok(accepted) => accepted,
                Err(err) => {
                    accept_failed(&err).await;
                    continue;
                }
            };
            match self.tally.admit(peer.ip()) {
                Some(slot) => return (Watched::new(stream, slot, self.tally.limits), peer),
                None => {
                    tracing::warn!(peer = %peer.ip(), "refused a connection past the caps (503)");
                    tokio::spawn(turn_away(stream));
                }
            }
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        self.listener.local_addr()
    }
}

/// Says 503 and closes, without waiting long on a peer that does not read.
async fn turn_away(mut stream: TcpStream) {
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        stream.write_all(BUSY).await?;
        stream.shutdown().await
    })
    .await;
}

/// A failed accept: one connection's trouble is passed over; running out
/// of descriptors waits a moment for some to be given back, rather than
/// spinning on the error.
async fn accept_failed(err: &io::Error) {
    let connection_only = matches!(
        err.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
    );
    if !connection_only {
        tracing::warn!(error = %err, "accepting a connection failed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// An admitted connection: closed (as a read error) when its first request
/// head is not in by its deadline, or when no byte has passed either way
/// for the idle time.
pub struct Watched {
    stream: TcpStream,
    _slot: Slot,
    limits: ConnectionLimits,
    deadline: Pin<Box<Sleep>>,
    /// Until the first head is in: the last (at most three) bytes read,
    /// to find its end (`\r\n\r\n`) across reads.
    head: Option<Vec<u8>>,
}

impl Watched {
    fn new(stream: TcpStream, slot: Slot, limits: ConnectionLimits) -> Self {
        Self {
            stream,
            _slot: slot,
            limits,
            deadline: Box::pin(tokio::time::sleep(limits.head.min(limits.idle))),
            head: Some(Vec::with_capacity(6)),
        }
    }

    /// Something passed: the idle clock starts again (the head deadline
    /// stands until the head is in).
    fn active(&mut self) {
        if self.head.is_none() {
            self.deadline
                .as_mut()
                .reset(Instant::now() + self.limits.idle);
        }
    }

    fn read_head(&mut self, bytes: &[u8]) {
        if let Some(tail) = &mut self.head
            && head_ends_in(tail, bytes)
        {
            self.head = None;
        }
    }

    fn expired(&mut self, cx: &mut Context<'_>) -> bool {
        self.deadline.as_mut().poll(cx).is_ready()
    }
}

/// Whether the end of a request head (`\r\n\r\n`) is in `bytes`, just
/// read, looked for in place: where it may straddle two reads, `tail` (the
/// last bytes of the reads before, at most three, kept here) is joined to
/// the first three bytes now.
fn head_ends_in(tail: &mut Vec<u8>, bytes: &[u8]) -> bool {
    const END: &[u8; 4] = b"\r\n\r\n";
    let mut joint = [0u8; 6];
    let first = &bytes[..bytes.len().min(3)];
    let kept = tail.len().min(3);
    joint[..kept].copy_from_slice(&tail[tail.len() - kept..]);
    joint[kept..kept + first.len()].copy_from_slice(first);
    let joint = &joint[..kept + first.len()];
    if joint.windows(4).any(|w| w == END) || bytes.windows(4).any(|w| w == END) {
        return true;
    }
    tail.extend_from_slice(&bytes[bytes.len().saturating_sub(3)..]);
    let keep = tail.len().saturating_sub(3);
    tail.drain(..keep);
    false
}

fn timed_out(head: bool) -> io::Error {
    let why = if head {
        "the request head did not arrive in time"
    } else {
        "the connection was idle too long"
    };
    io::Error::new(io::ErrorKind::TimedOut, why)
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        match Pin::new(&mut self.stream).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let read = &buf.filled()[before..];
                if !read.is_empty() {
                    self.read_head(read);
                    self.active();
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => {
                if self.expired(cx) {
                    let head = self.head.is_some();
                    Poll::Ready(Err(timed_out(head)))
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.stream).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = written
            && n > 0
        {
            self.active();
        }
        written
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> ConnectionLimits {
        ConnectionLimits::within(1 << 20, 3, 2)
    }

    #[test]
    fn the_end_of_a_head_is_found_however_the_reads_split_it() {
        let head = b"GET / HTTP/1.1\r\nHost: x\r\n\r\nbody";
        let end = head.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        for size in 1..=head.len() {
            let mut tail = Vec::new();
            let found = head
                .chunks(size)
                .scan(0, |read, chunk| {
                    *read += chunk.len();
                    Some((*read, head_ends_in(&mut tail, chunk)))
                })
                .find(|(_, ended)| *ended)
                .map(|(read, _)| read);
            let read = found.unwrap_or_else(|| panic!("reads of {size}: never found"));
            assert!(
                read >= end && read - size < end,
                "reads of {size}: at {read}"
            );
            assert!(tail.len() <= 3);
        }
        let mut tail = Vec::new();
        assert!(!head_ends_in(&mut tail, b"GET / HTTP/1.1\r\n\r"));
        assert!(!head_ends_in(&mut tail, b""));
        assert!(head_ends_in(&mut tail, b"\n"));
    }

    #[test]
    fn the_caps_hold_and_a_slot_given_back_is_free_again() {
        let tally = Tally {
            limits: limits(),
            counts: Arc::default(),
        };
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let first = tally.admit(a).unwrap();
        let _second = tally.admit(a).unwrap();
        assert!(tally.admit(a).is_none(), "per peer");
        let _third = tally.admit(b).unwrap();
        assert!(tally.admit(b).is_none(), "in total");
        drop(first);
        assert!(tally.admit(a).is_some());
    }

    #[test]
    fn the_total_leaves_room_for_the_files_portcullis_needs() {
        assert_eq!(ConnectionLimits::within(1024, 4096, 256).total, 1024 - 128);
        assert_eq!(ConnectionLimits::within(10, 4096, 256).total, 1);
        assert_eq!(ConnectionLimits::within(1 << 20, 4096, 256).total, 4096);
        assert_eq!(ConnectionLimits::within(1 << 20, 100, 256).per_peer, 100);
    }

    #[tokio::test]
    async fn a_silent_or_half_sent_head_is_closed_at_its_deadline_and_a_whole_one_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut admitting = AdmittingListener::new(
            listener,
            ConnectionLimits {
                head: Duration::from_millis(200),
                idle: Duration::from_secs(600),
                ..limits()
            },
        );
        for sent in [&b""[..], b"POST /mcp HTTP/1.1\r\nhost: x\r\n"] {
            let mut client = TcpStream::connect(address).await.unwrap();
            client.write_all(sent).await.unwrap();
            let (mut io, _) = axum::serve::Listener::accept(&mut admitting).await;
            let mut buf = [0u8; 64];
            let read = tokio::time::timeout(Duration::from_secs(60), async {
                loop {
                    match tokio::io::AsyncReadExt::read(&mut io, &mut buf).await {
                        Ok(0) => break Ok(0),
                        Ok(_) => {}
                        Err(err) => break Err(err),
                    }
                }
            })
            .await
            .expect("the deadline closes the connection");
            assert_eq!(read.unwrap_err().kind(), io::ErrorKind::TimedOut);
        }
        let mut client = TcpStream::connect(address).await.unwrap();
        client
            .write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let (mut io, _) = axum::serve::Listener::accept(&mut admitting).await;
        let mut buf = [0u8; 64];
        let read = tokio::io::AsyncReadExt::read(&mut io, &mut buf)
            .await
            .unwrap();
        assert!(read > 0);
        assert!(
            io.head.is_none(),
            "the head is in: only the idle time holds now"
        );
    }
}
