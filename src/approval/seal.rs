//! Sealed approval states: what binds a human's answer to one client and
//! one call. It may only seal and open; it never decides.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Sha256;
use thiserror::Error;

use crate::canonical::sha256_hex;
use crate::clock::Clock;

type HmacSha256 = Hmac<Sha256>;

/// Why a sealed state is refused. Each is audited; none runs the call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SealError {
    #[error("tampered")]
    Tampered,
    #[error("expired")]
    Expired,
    #[error("already used")]
    Replayed,
    #[error("issued to another client")]
    Foreign,
    #[error("issued for another call")]
    OtherCall,
}

impl SealError {
    pub fn code(self) -> &'static str {
        match self {
            SealError::Tampered => "tampered",
            SealError::Expired => "expired",
            SealError::Replayed => "replayed",
            SealError::Foreign => "foreign",
            SealError::OtherCall => "other_call",
        }
    }
}

#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Sealed {
    fingerprint: String,
    digest: String,
    expires: u64,
    nonce: String,
}

/// The digest an approval is bound to: SHA-256 over the canonical encoding
/// of the tool, its arguments and the policy set deciding it. Changing any
/// argument, or the policies, makes an old approval worthless.
pub fn action_digest(tool: &str, arguments: &Value, policy_set: &str) -> String {
    sha256_hex(&json!({"tool": tool, "arguments": arguments, "policy_set": policy_set}))
}

/// A state that checked out, whose nonce is still to be spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unspent {
    /// Hex: safe as a file name.
    pub nonce: String,
    /// Milliseconds since the epoch.
    pub expires: u64,
}

/// Seals and opens approval states for one server process.
pub struct ApprovalSeal {
    /// As long as SHA-256's block, so HMAC uses it as it is.
    key: [u8; 64],
    ttl: Duration,
    clock: Arc<dyn Clock>,
    /// Nonces spent, with their expiry, so a state works once.
    spent: Mutex<HashMap<String, u64>>,
}

impl ApprovalSeal {
    /// A new seal with a fresh random key; states live for `ttl` as
    /// `clock` tells it.
    pub fn new(ttl: Duration, clock: Arc<dyn Clock>) -> Result<Self, getrandom::Error> {
        let mut key = [0u8; 64];
        getrandom::fill(&mut key)?;
        Ok(Self::with_key(key, ttl, clock))
    }

    /// A seal with a key several processes share (a hook that asks and
    /// the `exec` that runs what was approved); they spend nonces where
    /// all of them see it (see [`ApprovalSeal::verify`]).
    pub fn with_key(key: [u8; 64], ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        Self {
            key,
            ttl,
            clock,
            spent: Mutex::new(HashMap::new()),
        }
    }

    fn mac(&self) -> HmacSha256 {
        HmacSha256::new(&self.key.into())
    }

    /// Milliseconds since the epoch: expiry is checked to the millisecond,
    /// so a state lives its whole time to live, not up to a second less.
    fn now(&self) -> u64 {
        self.clock.now_millis()
    }

    /// A state for a question about the call with `digest`, asked of the
    /// client with `fingerprint`.
    pub fn seal(&self, fingerprint: &str, digest: &str) -> Result<String, getrandom::Error> {
        let mut nonce = [0u8; 16];
        getrandom::fill(&mut nonce)?;
        let sealed = Sealed {
            fingerprint: fingerprint.to_owned(),
            digest: digest.to_owned(),
            expires: self.now()
                + u64::try_from(self.ttl.as_millis())
                    .unwrap_or(u64::MAX)
                    .max(1),
            nonce: hex::encode(nonce),
        };
        let payload = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&sealed).unwrap_or_default());
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        let tag = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
        Ok(format!("{payload}.{tag}"))
    }

    /// Opens a state for the call with `digest` by the client with
    /// `fingerprint`, spending its nonce. Every check is made before the
    /// nonce is spent, so a refused state cannot burn a valid one.
    pub fn open(&self, state: &str, fingerprint: &str, digest: &str) -> Result<(), SealError> {
        let unspent = self.verify(state, fingerprint, digest)?;
        let mut spent = self
            .spent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = self.now();
        spent.retain(|_, expires| *expires > now);
        if spent.insert(unspent.nonce, unspent.expires).is_some() {
            return Err(SealError::Replayed);
        }
        Ok(())
    }

    /// Checks a state for the call with `digest` by the client with
    /// `fingerprint` without spending it: the caller spends the nonce it
    /// returns, once, where every process that opens states sees it.
    pub fn verify(
        &self,
        state: &str,
        fingerprint: &str,
        digest: &str,
    ) -> Result<Unspent, SealError> {
        let (payload, tag) = state.split_once('.').ok_or(SealError::Tampered)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| SealError::Tampered)?;
        let mut mac = self.mac();
        mac.update(payload.as_bytes());
        mac.verify_slice(&tag).map_err(|_| SealError::Tampered)?;
        let bytes = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| SealError::Tampered)?;
        let sealed: Sealed = serde_json::from_slice(&bytes).map_err(|_| SealError::Tampered)?;
        let now = self.now();
        if sealed.expires <= now {
            return Err(SealError::Expired);
        }
        if sealed.fingerprint != fingerprint {
            return Err(SealError::Foreign);
        }
        if sealed.digest != digest {
            return Err(SealError::OtherCall);
        }
        Ok(Unspent {
            nonce: sealed.nonce,
            expires: sealed.expires,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::{SystemTime, UNIX_EPOCH};

    use super::*;
    use crate::clock::{ManualClock, SystemClock};

    fn seal() -> ApprovalSeal {
        ApprovalSeal::new(Duration::from_secs(600), Arc::new(SystemClock)).unwrap()
    }

    #[test]
    fn a_state_opens_once_for_its_client_and_call() {
        let s = seal();
        let state = s.seal("fp", "d").unwrap();
        assert_eq!(s.open(&state, "fp", "d"), Ok(()));
        assert_eq!(s.open(&state, "fp", "d"), Err(SealError::Replayed));
    }

    #[test]
    fn another_client_or_call_is_refused_without_spending_the_state() {
        let s = seal();
        let state = s.seal("fp", "d").unwrap();
        assert_eq!(s.open(&state, "other", "d"), Err(SealError::Foreign));
        assert_eq!(s.open(&state, "fp", "changed"), Err(SealError::OtherCall));
        assert_eq!(s.open(&state, "fp", "d"), Ok(()));
    }

    #[test]
    fn a_tampered_state_is_refused() {
        let s = seal();
        let state = s.seal("fp", "d").unwrap();
        let (payload, tag) = state.split_once('.').unwrap();
        let forged = String::from_utf8(URL_SAFE_NO_PAD.decode(payload).unwrap())
            .unwrap()
            .replace("\"fp\"", "\"fq\"");
        let forged = format!("{}.{tag}", URL_SAFE_NO_PAD.encode(forged));
        assert_eq!(s.open(&forged, "fq", "d"), Err(SealError::Tampered));
        assert_eq!(s.open("garbage", "fp", "d"), Err(SealError::Tampered));
        assert_eq!(
            s.open(&format!("{payload}.AAAA"), "fp", "d"),
            Err(SealError::Tampered)
        );
        // Another process's key: refused too.
        assert_eq!(seal().open(&state, "fp", "d"), Err(SealError::Tampered));
    }

    #[test]
    fn a_state_lives_its_whole_time_to_live_and_not_a_millisecond_more() {
        let clock = Arc::new(ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_000)));
        let s = ApprovalSeal::new(Duration::from_secs(1), Arc::clone(&clock) as Arc<dyn Clock>)
            .unwrap();
        let early = s.seal("fp", "d").unwrap();
        let late = s.seal("fp", "d").unwrap();
        clock.advance(Duration::from_millis(999));
        assert_eq!(s.open(&early, "fp", "d"), Ok(()));
        clock.advance(Duration::from_millis(1));
        assert_eq!(s.open(&late, "fp", "d"), Err(SealError::Expired));
        // An expired state does not count as spent: its nonce was never taken.
        assert_eq!(s.spent.lock().unwrap().len(), 1);
    }

    #[test]
    fn spent_nonces_are_forgotten_once_their_state_has_expired() {
        let clock = Arc::new(ManualClock::new(SystemTime::now()));
        let s = ApprovalSeal::new(
            Duration::from_secs(60),
            Arc::clone(&clock) as Arc<dyn Clock>,
        )
        .unwrap();
        let first = s.seal("fp", "d").unwrap();
        assert_eq!(s.open(&first, "fp", "d"), Ok(()));
        clock.advance(Duration::from_secs(61));
        let second = s.seal("fp", "d").unwrap();
        assert_eq!(s.open(&second, "fp", "d"), Ok(()));
        assert_eq!(
            s.spent.lock().unwrap().len(),
            1,
            "the first nonce was dropped"
        );
        // And the first state stays refused: expired, not replayable.
        assert_eq!(s.open(&first, "fp", "d"), Err(SealError::Expired));
    }

    #[test]
    fn the_digest_binds_tool_arguments_and_policies() {
        let a = action_digest(
            "builtin/write_file",
            &json!({"path": "a", "content": "x"}),
            "h",
        );
        assert_eq!(
            a,
            action_digest(
                "builtin/write_file",
                &json!({"content": "x", "path": "a"}),
                "h"
            )
        );
        assert_ne!(
            a,
            action_digest(
                "builtin/write_file",
                &json!({"path": "a", "content": "y"}),
                "h"
            )
        );
        assert_ne!(
            a,
            action_digest(
                "builtin/edit_file",
                &json!({"path": "a", "content": "x"}),
                "h"
            )
        );
        assert_ne!(
            a,
            action_digest(
                "builtin/write_file",
                &json!({"path": "a", "content": "x"}),
                "h2"
            )
        );
    }
}
