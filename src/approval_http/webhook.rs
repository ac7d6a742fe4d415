//! `serve --approval-webhook URL`: every new question of the inbox is
//! POSTed as JSON to a receiver (a chat's incoming webhook, a relay), with a
//! Slack-compatible `text`, the question as the page shows it (never an
//! argument policies cannot see) and a link to the page. Each delivery is
//! signed: `X-Portcullis-Timestamp` (Unix seconds) and
//! `X-Portcullis-Signature: v1=HEX`, the HMAC-SHA256 under the shared
//! secret of `TIMESTAMP.BODY`, so a receiver can tell it came from here and
//! refuse an old one replayed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde_json::json;
use sha2::Sha256;

use crate::approval::{Announce, QuestionView};
use crate::clock::{Clock, SystemClock};

/// The header naming when a delivery was signed.
pub const TIMESTAMP_HEADER: &str = "x-portcullis-timestamp";
/// The header carrying the signature.
pub const SIGNATURE_HEADER: &str = "x-portcullis-signature";
/// The environment variable that may hold the secret instead of a file.
pub const WEBHOOK_SECRET_ENV: &str = "PORTCULLIS_APPROVAL_WEBHOOK_SECRET";
/// The shortest secret taken, in bytes.
const MIN_SECRET: usize = 16;
/// Deliveries tried per question, with a growing pause between them.
const ATTEMPTS: u32 = 3;

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the webhook secret {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("the webhook secret {} can be read by others (mode {mode:o}); run `chmod 600 {}`", path.display(), path.display())]
    Readable { path: PathBuf, mode: u32 },
    /// The secret is never repeated.
    #[error("the webhook secret from {0} is shorter than {MIN_SECRET} bytes")]
    Short(String),
    #[error("the webhook URL must be http:// or https://, not `{0}`")]
    Url(String),
    #[error("cannot make an HTTP client for the webhook: {0}")]
    Client(String),
}

/// The secret in `path` (surrounding white space ignored), in a file only
/// its owner can read.
pub fn webhook_secret_from_file(path: &Path) -> Result<Vec<u8>, WebhookError> {
    let read = |source| WebhookError::Read {
        path: path.to_owned(),
        source,
    };
    let mode = std::fs::metadata(path).map_err(read)?.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        return Err(WebhookError::Readable {
            path: path.to_owned(),
            mode,
        });
    }
    let text = std::fs::read(path).map_err(read)?;
    secret(text.trim_ascii(), &path.display().to_string())
}

/// The secret as given in [`WEBHOOK_SECRET_ENV`].
pub fn webhook_secret_from_env(text: &str) -> Result<Vec<u8>, WebhookError> {
    secret(text.trim().as_bytes(), WEBHOOK_SECRET_ENV)
}

fn secret(bytes: &[u8], from: &str) -> Result<Vec<u8>, WebhookError> {
    if bytes.len() < MIN_SECRET {
        return Err(WebhookError::Short(from.to_owned()));
    }
    Ok(bytes.to_vec())
}

/// `v1=HEX`: the signature of `body` sent at `timestamp`.
pub fn signature(secret: &[u8], timestamp: u64, body: &str) -> String {
    let mut mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(format!("{timestamp}.{body}").as_bytes());
    format!("v1={}", hex::encode(mac.finalize().into_bytes()))
}

/// The delivery of one question: its body.
pub fn payload(question: &QuestionView, page: &str) -> String {
    let link = format!("{}/#q-{}", page.trim_end_matches('/'), question.id);
    let paths: Vec<String> = question
        .paths
        .iter()
        .map(|(name, shown)| format!("{name} = {shown}"))
        .collect();
    let reasons: Vec<&str> = question
        .policies
        .iter()
        .map(|p| p.reason.as_str())
        .collect();
    let quorum = if question.required > 1 {
        format!(" ({} approvers needed)", question.required)
    } else {
        String::new()
    };
    let text = format!(
        "portcullis: `{}` (tier {}) waits for an approval{quorum} to run `{}` ({}){}. Why: {}. Answer before {}: {link}",
        question.client,
        question.client_tier,
        question.name,
        question.tool,
        if paths.is_empty() {
            String::new()
        } else {
            format!(" on {}", paths.join(", "))
        },
        reasons.join("; "),
        question.expires_at,
    );
    json!({"text": text, "url": link, "question": question}).to_string()
}

/// Announces each new question to one receiver.
pub struct Webhook {
    url: String,
    secret: Vec<u8>,
    /// The page's address, for the link in each message.
    page: String,
    client: reqwest::Client,
}

impl Webhook {
    pub fn new(url: &str, secret: Vec<u8>, page: &str) -> Result<Self, WebhookError> {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(WebhookError::Url(url.to_owned()));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|err| WebhookError::Client(err.to_string()))?;
        Ok(Self {
            url: url.to_owned(),
            secret,
            page: page.to_owned(),
            client,
        })
    }
}

impl Announce for Webhook {
    /// Delivers in the background: the asking call waits for its answer,
    /// not for the chat.
    fn announce(&self, question: &QuestionView) {
        let body = payload(question, &self.page);
        let (client, url, secret) = (self.client.clone(), self.url.clone(), self.secret.clone());
        let id = question.id.clone();
        tokio::spawn(async move {
            for attempt in 1..=ATTEMPTS {
                let timestamp = SystemClock.now_millis() / 1000;
                let sent = client
                    .post(&url)
                    .header("content-type", "application/json")
                    .header(TIMESTAMP_HEADER, timestamp.to_string())
                    .header(SIGNATURE_HEADER, signature(&secret, timestamp, &body))
                    .body(body.clone())
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status().is_success() => return,
                    Ok(response) => {
                        tracing::warn!(question = %id, status = %response.status(), attempt, "the approval webhook refused a question");
                    }
                    Err(err) => {
                        tracing::warn!(question = %id, error = %err, attempt, "the approval webhook cannot be reached");
                    }
                }
                tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
            }
            tracing::error!(question = %id, "the approval webhook was not told of a question: approvers see it on the page");
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "a test fails by panicking")]

    use super::*;

    #[test]
    fn the_signature_covers_the_timestamp_and_the_body() {
        let secret = b"0123456789abcdef0123";
        let signed = signature(secret, 1_700_000_000, "{}");
        assert!(signed.starts_with("v1=") && signed.len() == 3 + 64);
        assert_ne!(signed, signature(secret, 1_700_000_001, "{}"));
        assert_ne!(signed, signature(secret, 1_700_000_000, "{ }"));
        assert_ne!(
            signed,
            signature(b"another secret, long", 1_700_000_000, "{}")
        );
    }

    #[test]
    fn a_short_or_readable_secret_is_refused_without_repeating_it() {
        assert!(matches!(
            webhook_secret_from_env("short"),
            Err(WebhookError::Short(_))
        ));
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "a secret long enough\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(matches!(
            webhook_secret_from_file(&path),
            Err(WebhookError::Readable { mode: 0o644, .. })
        ));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(
            webhook_secret_from_file(&path).unwrap(),
            b"a secret long enough"
        );
        let err = Webhook::new("ftp://x", b"0123456789abcdef".to_vec(), "http://p/")
            .err()
            .unwrap();
        assert!(err.to_string().contains("http:// or https://"));
    }
}
