//! The stdio transport of a downstream server started under its guard:
//! rmcp's line transport over the child's pipes, with the child's stdout
//! bounded. rmcp drops a line past its limit and keeps reading, so a call
//! whose answer was that line would wait for its whole timeout; here the
//! first byte past the limit ends the session at once, every call in
//! flight fails as the server's being unavailable, and the server is
//! started again.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout};

/// The longest message a server may send: rmcp's own line limit.
pub const MAX_FRAME_BYTES: usize = rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH;

/// How long a server's guard gets to end after its stdin closes, and
/// again after SIGTERM, before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(5);

/// A reader that fails once a line runs past `limit` bytes.
pub struct Bounded<R> {
    inner: R,
    limit: usize,
    /// Bytes since the last newline.
    line: usize,
}

impl<R> Bounded<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        Self {
            inner,
            limit,
            line: 0,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for Bounded<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = polled {
            let mut line = self.line;
            for byte in &buf.filled()[before..] {
                line = if *byte == b'\n' { 0 } else { line + 1 };
                if line > self.limit {
                    // A read that fails hands over nothing: the session ends
                    // here, and nothing of the oversized line is passed on.
                    buf.set_filled(before);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("the server sent a message longer than {} bytes", self.limit),
                    )));
                }
            }
            self.line = line;
        }
        polled
    }
}

/// A started server: its guard process and the transport over its pipes.
pub struct ChildTransport {
    child: Child,
    transport: AsyncRwTransport<RoleClient, Bounded<ChildStdout>, ChildStdin>,
}

impl ChildTransport {
    /// Takes the pipes of `child` (spawned with stdin and stdout piped).
    pub fn new(mut child: Child) -> io::Result<Self> {
        let missing = |pipe: &str| io::Error::other(format!("the server's {pipe} is not a pipe"));
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        Ok(Self {
            child,
            transport: AsyncRwTransport::new(Bounded::new(stdout, MAX_FRAME_BYTES), stdin),
        })
    }

    /// The stdio shutdown the protocol describes: stdin closed, then
    /// [`stop_child`].
    async fn shut_down(&mut self) -> io::Result<()> {
        self.transport.close().await?;
        stop_child(&mut self.child).await
    }
}

/// Ends a server whose stdin is closed: a wait, SIGTERM, a wait, then
/// SIGKILL (its guard passes each on to the server's whole process group).
pub async fn stop_child(child: &mut Child) -> io::Result<()> {
    if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok() {
        return Ok(());
    }
    if let Some(pid) = child
        .id()
        .and_then(|id| rustix::process::Pid::from_raw(id as i32))
    {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        if tokio::time::timeout(EXIT_WAIT, child.wait()).await.is_ok() {
            return Ok(());
        }
    }
    child.kill().await
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.shut_down()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_line_past_the_limit_fails_the_read_and_shorter_ones_pass() {
        let mut fine = Bounded::new(&b"12345\n12345\n"[..], 5);
        let mut all = Vec::new();
        fine.read_to_end(&mut all).await.unwrap();
        assert_eq!(all, b"12345\n12345\n");
        let mut long = Bounded::new(&b"12345\n123456\n"[..], 5);
        let err = long.read_to_end(&mut Vec::new()).await.unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
    }
}
