//! Client tokens: random, prefixed so a scanner can spot a leaked one, and
//! known afterwards only by their hash and a short fingerprint. Nothing
//! here stores or compares tokens.

use sha2::{Digest, Sha256};

/// A client token as given to the client; never stored.
pub struct Token(String);

impl Token {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Prefix of every token, so that a leaked token is recognisable (secret
/// scanners match prefixes).
const PREFIX: &str = "pcl_";

/// A new random token: 32 bytes from the operating system, hex-encoded.
pub fn generate() -> Result<Token, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(Token(format!("{PREFIX}{}", hex::encode(bytes))))
}

/// The SHA-256 of a token, as stored.
pub fn hash_token(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// The first 16 hex digits of a token's hash: names a token in logs and
/// audit records without revealing it.
pub fn fingerprint(hash: &[u8; 32]) -> String {
    hex::encode(&hash[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_prefixed_random_and_long() {
        let a = generate().unwrap();
        let b = generate().unwrap();
        assert!(a.as_str().starts_with("pcl_"));
        assert_eq!(a.as_str().len(), 4 + 64);
        assert_ne!(a.as_str(), b.as_str());
    }

    #[test]
    fn the_fingerprint_is_16_hex_digits_of_the_hash() {
        let hash = hash_token("pcl_x");
        let fp = fingerprint(&hash);
        assert_eq!(fp.len(), 16);
        assert!(hex::encode(hash).starts_with(&fp));
    }
}
