//! A hook that asks a running `serve` instead of loading the policy set
//! itself: a hook process starts for every tool call, and loading a team's
//! set (parsing it, its schema, the tools' argument schemas) is most of
//! what it costs, while a `serve` beside it already holds the set warm.
//!
//! One question per connection over a Unix socket: a header line (JSON:
//! who asks, with which set, root, token store and log), then the event's
//! bytes exactly as the harness wrote them, then end of input; the answer
//! is one JSON object, then end of input. `serve` parses the event with the
//! hook's own parser, decides with the same decision point and records in
//! the same log; it declines anything it would not decide exactly as the
//! hook would (another set, store or log), and the hook then decides
//! itself. Both ends talk only to a process of their own user.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::{Harness, HookAnswer, MAX_EVENT_BYTES, Permission};

/// Where `serve` answers hooks, and where a hook asks.
pub const SOCKET_ENV: &str = "PORTCULLIS_HOOK_SOCKET";

/// Most bytes of the header line: paths, a token, a hash, an `exec` line.
const MAX_HEADER_BYTES: u64 = 256 * 1024;

/// Most bytes of an answer: its changed input is at most the event's.
const MAX_ANSWER_BYTES: u64 = 2 * MAX_EVENT_BYTES as u64;

/// Who asks, and everything `serve` must hold the same to answer for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookAsk {
    pub harness: Harness,
    /// The client's token, checked against the store as the hook would.
    pub token: String,
    /// The workspace root paths are judged against (canonical).
    pub root: PathBuf,
    /// The hash of the set the hook would load.
    pub policy_set: String,
    /// The token store (canonical): its client, approvals and proofs.
    pub store: PathBuf,
    /// The audit log (canonical) the decision must be recorded in.
    pub audit: PathBuf,
    /// `portcullis exec` with the hook's flags, when an allowed shell
    /// command is handed back through it.
    pub exec: Option<Vec<String>>,
    /// What `~` stands for in the hook's judgement: its `HOME`.
    pub home: Option<PathBuf>,
    /// The hook's binary (device, inode): another build may decide
    /// otherwise.
    pub binary: (u64, u64),
}

/// This process's binary as (device, inode): the file it was started
/// from, even when an upgrade has since replaced the path.
pub fn this_binary() -> io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let binary = std::fs::metadata("/proc/self/exe")?;
    Ok((binary.dev(), binary.ino()))
}

/// What `serve` says: the answer it decided and recorded, or why it left
/// the event to the hook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum HookReply {
    Answer {
        permission: Permission,
        reason: String,
        updated_input: Option<Value>,
    },
    Declined {
        reason: String,
    },
}

impl From<HookAnswer> for HookReply {
    fn from(answer: HookAnswer) -> Self {
        HookReply::Answer {
            permission: answer.permission,
            reason: answer.reason,
            updated_input: answer.updated_input,
        }
    }
}

#[derive(Debug, Error)]
pub enum RemoteError {
    #[error("nothing answers at {}: {source}", path.display())]
    Unreachable { path: PathBuf, source: io::Error },
    #[error("the other end of the socket runs as user {peer}, not as this process's user {own}")]
    Stranger { peer: u32, own: u32 },
    #[error("the hook socket failed: {0}")]
    Io(#[from] io::Error),
    #[error("the hook socket's {what} is larger than {limit} bytes")]
    TooLarge { what: &'static str, limit: u64 },
    #[error("the hook socket's {what} is malformed: {detail}")]
    Malformed { what: &'static str, detail: String },
}

/// Asks the `serve` at `socket` to decide `event` (the harness's bytes).
pub async fn ask(socket: &Path, ask: &HookAsk, event: &[u8]) -> Result<HookReply, RemoteError> {
    let mut stream =
        UnixStream::connect(socket)
            .await
            .map_err(|source| RemoteError::Unreachable {
                path: socket.to_owned(),
                source,
            })?;
    same_user(&stream)?;
    let mut header = serde_json::to_vec(ask).map_err(|err| RemoteError::Malformed {
        what: "question",
        detail: err.to_string(),
    })?;
    header.push(b'\n');
    stream.write_all(&header).await?;
    stream.write_all(event).await?;
    stream.shutdown().await?;
    let answer = read_limited(&mut stream, MAX_ANSWER_BYTES, "answer").await?;
    serde_json::from_slice(&answer).map_err(|err| RemoteError::Malformed {
        what: "answer",
        detail: err.to_string(),
    })
}

/// Reads one question from a hook: its header and the event's bytes.
pub async fn read_ask(stream: &mut UnixStream) -> Result<(HookAsk, Vec<u8>), RemoteError> {
    same_user(stream)?;
    let mut reader = BufReader::new(stream);
    let mut header = Vec::new();
    (&mut reader)
        .take(MAX_HEADER_BYTES + 1)
        .read_until(b'\n', &mut header)
        .await?;
    if header.last() != Some(&b'\n') {
        return Err(if header.len() as u64 > MAX_HEADER_BYTES {
            RemoteError::TooLarge {
                what: "question's header",
                limit: MAX_HEADER_BYTES,
            }
        } else {
            RemoteError::Malformed {
                what: "question's header",
                detail: "it ends before its line does".into(),
            }
        });
    }
    let ask = serde_json::from_slice(&header).map_err(|err| RemoteError::Malformed {
        what: "question's header",
        detail: err.to_string(),
    })?;
    let event = read_limited(&mut reader, MAX_EVENT_BYTES as u64, "event").await?;
    Ok((ask, event))
}

/// Writes the answer and ends the connection.
pub async fn write_reply(stream: &mut UnixStream, reply: &HookReply) -> Result<(), RemoteError> {
    let bytes = serde_json::to_vec(reply).map_err(|err| RemoteError::Malformed {
        what: "answer",
        detail: err.to_string(),
    })?;
    stream.write_all(&bytes).await?;
    stream.shutdown().await?;
    Ok(())
}

impl HookReply {
    /// The harness's answer, unless `serve` declined.
    pub fn into_answer(self) -> Result<HookAnswer, String> {
        match self {
            HookReply::Answer {
                permission,
                reason,
                updated_input,
            } => Ok(HookAnswer {
                permission,
                reason,
                updated_input,
            }),
            HookReply::Declined { reason } => Err(reason),
        }
    }
}

/// Whoever can bind or connect to the socket as this user could run the
/// hook itself; anyone else must not decide for it or ask through it.
fn same_user(stream: &UnixStream) -> Result<(), RemoteError> {
    let peer = stream.peer_cred()?.uid();
    let own = rustix::process::getuid().as_raw();
    if peer == own {
        Ok(())
    } else {
        Err(RemoteError::Stranger { peer, own })
    }
}

async fn read_limited(
    reader: &mut (impl AsyncReadExt + Unpin),
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, RemoteError> {
    let mut bytes = Vec::new();
    reader.take(limit + 1).read_to_end(&mut bytes).await?;
    if bytes.len() as u64 > limit {
        return Err(RemoteError::TooLarge { what, limit });
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn question() -> HookAsk {
        HookAsk {
            harness: Harness::ClaudeCode,
            token: "pcl_x".into(),
            root: "/ws".into(),
            policy_set: "abc".into(),
            store: "/state/tokens.json".into(),
            audit: "/state/audit/audit.jsonl".into(),
            exec: Some(vec!["portcullis".into(), "exec".into()]),
            home: Some("/home/a".into()),
            binary: this_binary().unwrap(),
        }
    }

    #[tokio::test]
    async fn a_question_and_its_answer_cross_whole() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hook.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let event = br#"{"hook_event_name":"PreToolUse"}"#;
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let (asked, bytes) = read_ask(&mut stream).await.unwrap();
            let reply =
                HookReply::from(HookAnswer::deny(format!("{} {}", asked.token, bytes.len())));
            write_reply(&mut stream, &reply).await.unwrap();
            asked
        });
        let reply = ask(&path, &question(), event).await.unwrap();
        assert_eq!(server.await.unwrap(), question());
        let answer = reply.into_answer().unwrap();
        assert_eq!(answer.permission, Permission::Deny);
        assert_eq!(answer.reason, format!("pcl_x {}", event.len()));
    }

    #[tokio::test]
    async fn nothing_listening_is_unreachable_and_a_declined_answer_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.sock");
        let err = ask(&path, &question(), b"{}").await.unwrap_err();
        assert!(matches!(err, RemoteError::Unreachable { .. }), "{err}");
        let declined = HookReply::Declined {
            reason: "another set".into(),
        };
        assert_eq!(declined.into_answer().unwrap_err(), "another set");
    }

    /// A question whose header never ends, or is not JSON, or an answer
    /// that is not one, is an error, not a decision.
    #[tokio::test]
    async fn a_broken_header_or_answer_is_refused() {
        for (sent, expected) in [
            (&b"{\"harness\":"[..], "ends before its line"),
            (&b"not json\n{}"[..], "malformed"),
        ] {
            let (mut client, mut server) = UnixStream::pair().unwrap();
            client.write_all(sent).await.unwrap();
            client.shutdown().await.unwrap();
            let err = read_ask(&mut server).await.unwrap_err();
            assert!(err.to_string().contains(expected), "{err}");
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("hook.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let _ = read_ask(&mut stream).await;
            stream.write_all(b"{\"reply\":\"maybe\"}").await.unwrap();
        });
        let err = ask(&path, &question(), b"{}").await.unwrap_err();
        assert!(
            matches!(err, RemoteError::Malformed { what: "answer", .. }),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_header_past_its_limit_is_refused() {
        let (mut client, mut server) = UnixStream::pair().unwrap();
        let writer = tokio::spawn(async move {
            let long = vec![b' '; usize::try_from(MAX_HEADER_BYTES).unwrap() + 10];
            // The reader stops at its limit and drops the connection.
            let _ = client.write_all(&long).await;
        });
        let err = read_ask(&mut server).await.unwrap_err();
        assert!(matches!(err, RemoteError::TooLarge { .. }), "{err}");
        drop(server);
        writer.await.unwrap();
    }
}
