//! The stdio transport: newline-delimited JSON-RPC on stdin and stdout,
//! with an edge that answers. A line that is not JSON gets -32700, a JSON
//! value that is not a message gets -32600 (with its id when it has one),
//! an over-long line is refused without being held in memory, and a second
//! `initialize` is refused: a client cannot renegotiate capabilities (turn
//! on elicitation, say) in the middle of a session. Refused frames are
//! logged as one `warn` line that never holds their content.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::{ClientRequest, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::Mutex;

/// Longest frame read, in bytes; a longer line is refused and skipped.
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;

/// One line read from the client.
enum Frame {
    Line(Vec<u8>),
    TooLong,
}

pub struct LineTransport<R, W> {
    reader: BufReader<R>,
    writer: Arc<Mutex<W>>,
    initialized: bool,
    /// The line read so far. rmcp polls `receive` inside a `select!` and
    /// may drop it between two reads; what was read must survive that.
    partial: Vec<u8>,
    /// The current line went past the limit: skip to its end.
    too_long: bool,
}

impl<R, W> LineTransport<R, W>
where
    R: tokio::io::AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    pub fn new(reader: R, writer: W) -> Self {
        Self {
            reader: BufReader::new(reader),
            writer: Arc::new(Mutex::new(writer)),
            initialized: false,
            partial: Vec::new(),
            too_long: false,
        }
    }

    /// The next line, without its newline; `None` at the end of input.
    /// Cancel-safe: the only await is `fill_buf`, which consumes nothing,
    /// and what is consumed after it is kept in `self`.
    async fn read_frame(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                let line = std::mem::take(&mut self.partial);
                return Ok(
                    match (line.is_empty(), std::mem::take(&mut self.too_long)) {
                        (_, true) => Some(Frame::TooLong),
                        (true, false) => None,
                        (false, false) => Some(Frame::Line(line)),
                    },
                );
            }
            let (chunk, ends) = match available.iter().position(|b| *b == b'\n') {
                Some(at) => (&available[..at], Some(at + 1)),
                None => (available, None),
            };
            if !self.too_long {
                if self.partial.len() + chunk.len() > MAX_FRAME_BYTES {
                    self.too_long = true;
                    self.partial = Vec::new();
                } else {
                    self.partial.extend_from_slice(chunk);
                }
            }
            let consumed = ends.unwrap_or(available.len());
            self.reader.consume(consumed);
            if ends.is_some() {
                let line = std::mem::take(&mut self.partial);
                return Ok(Some(if std::mem::take(&mut self.too_long) {
                    Frame::TooLong
                } else {
                    Frame::Line(line)
                }));
            }
        }
    }

    /// Answers a refused frame on a task of its own, so that a `receive`
    /// dropped by rmcp's `select!` cannot leave half an answer on stdout.
    fn reply_error(&self, id: Value, code: i64, message: &'static str) {
        let writer = Arc::clone(&self.writer);
        tokio::spawn(async move { reply_error(&writer, id, code, message).await });
    }

    /// Judges one line: a message to hand on, or a refusal already sent.
    fn judge(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleServer>> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        // A well-formed message is parsed once, straight into its type;
        // only a line that is not one is looked at again, to say why.
        let Ok(message) = serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) else {
            self.refuse(line);
            return None;
        };
        if let JsonRpcMessage::Request(request) = &message
            && matches!(request.request, ClientRequest::InitializeRequest(_))
        {
            if self.initialized {
                tracing::warn!("refused a second initialize (-32600)");
                self.reply_error(
                    serde_json::to_value(&request.id).unwrap_or(Value::Null),
                    INVALID_REQUEST,
                    "Invalid Request: the session is already initialized",
                );
                return None;
            }
            self.initialized = true;
        }
        Some(message)
    }

    /// Answers a line that is not an MCP message: not JSON at all, a
    /// request or response that is not JSON-RPC, or a notification nothing
    /// here knows (which gets no answer, not even an error).
    fn refuse(&mut self, line: &[u8]) {
        let Ok(value) = serde_json::from_slice::<Value>(line) else {
            tracing::warn!(
                bytes = line.len(),
                "refused a frame that is not JSON (-32700)"
            );
            self.reply_error(Value::Null, PARSE_ERROR, "Parse error");
            return;
        };
        let id = value
            .get("id")
            .filter(|id| id.is_string() || id.is_number())
            .cloned();
        if id.is_none() && value.get("method").is_some_and(Value::is_string) {
            tracing::warn!("ignored a notification that is not an MCP notification");
            return;
        }
        tracing::warn!(
            bytes = line.len(),
            has_id = id.is_some(),
            "refused a frame that is not a JSON-RPC message (-32600)"
        );
        self.reply_error(
            id.unwrap_or(Value::Null),
            INVALID_REQUEST,
            "Invalid Request",
        );
    }
}

/// Answers a refused frame with a JSON-RPC error.
async fn reply_error<W: AsyncWrite + Unpin>(
    writer: &Mutex<W>,
    id: Value,
    code: i64,
    message: &str,
) {
    let frame = json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}});
    let mut bytes = frame.to_string().into_bytes();
    bytes.push(b'\n');
    let mut writer = writer.lock().await;
    let written = match writer.write_all(&bytes).await {
        Ok(()) => writer.flush().await,
        Err(err) => Err(err),
    };
    if let Err(err) = written {
        tracing::warn!(error = %err, "could not answer a refused frame");
    }
}

impl<R, W> Transport<RoleServer> for LineTransport<R, W>
where
    R: tokio::io::AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let writer = Arc::clone(&self.writer);
        async move {
            let mut bytes = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            bytes.push(b'\n');
            let mut writer = writer.lock().await;
            writer.write_all(&bytes).await?;
            writer.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            let frame = match self.read_frame().await {
                Ok(Some(frame)) => frame,
                Ok(None) => return None,
                Err(err) => {
                    tracing::error!(error = %err, "cannot read stdin");
                    return None;
                }
            };
            match frame {
                Frame::TooLong => {
                    tracing::warn!(
                        limit = MAX_FRAME_BYTES,
                        "refused an over-long frame (-32600)"
                    );
                    self.reply_error(
                        Value::Null,
                        INVALID_REQUEST,
                        "Invalid Request: frame too long",
                    );
                }
                Frame::Line(line) => {
                    if let Some(message) = self.judge(&line) {
                        return Some(message);
                    }
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.writer.lock().await.flush().await
    }
}
