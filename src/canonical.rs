//! The canonical encoding records are hashed over: RFC 8785 (JCS) for the
//! values portcullis writes. Object keys sorted (by UTF-16 code units, as
//! JCS says), no whitespace, strings escaped as JSON.stringify does, which
//! serde_json also does. Numbers are integers, written as they are; records
//! hold no floating-point numbers. Sorting is done here, not left to
//! serde_json, whose map keeps insertion order when a dependency enables
//! `preserve_order`.

use serde_json::Value;
use sha2::{Digest, Sha256};

pub fn encode(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(512);
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut Vec<u8>) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            // UTF-8 byte order is code point order, which is UTF-16 order
            // except above U+FFFF; plain byte comparison for ASCII keys.
            entries.sort_by(|a, b| {
                if a.0.is_ascii() && b.0.is_ascii() {
                    a.0.cmp(b.0)
                } else {
                    a.0.encode_utf16().cmp(b.0.encode_utf16())
                }
            });
            out.push(b'{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(key, out);
                out.push(b':');
                write(item, out);
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(item, out);
            }
            out.push(b']');
        }
        scalar => write_scalar(scalar, out),
    }
}

fn write_str(text: &str, out: &mut Vec<u8>) {
    // Serialising a string into a Vec cannot fail.
    if serde_json::to_writer(&mut *out, text).is_err() {
        out.extend_from_slice(b"\"\"");
    }
}

fn write_scalar(value: &Value, out: &mut Vec<u8>) {
    // Serialising a scalar into a Vec cannot fail: no I/O, no maps with
    // non-string keys.
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// SHA-256 of the canonical encoding, lower-case hex.
pub fn sha256_hex(value: &Value) -> String {
    hex::encode(Sha256::digest(encode(value)))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn keys_are_sorted_at_every_level_without_whitespace() {
        let value = json!({"b": 1, "a": {"d": [true, null], "c": "x"}});
        assert_eq!(
            String::from_utf8(encode(&value)).unwrap(),
            r#"{"a":{"c":"x","d":[true,null]},"b":1}"#
        );
    }

    #[test]
    fn insertion_order_does_not_matter() {
        let mut one = serde_json::Map::new();
        one.insert("z".into(), json!(1));
        one.insert("a".into(), json!(2));
        let mut two = serde_json::Map::new();
        two.insert("a".into(), json!(2));
        two.insert("z".into(), json!(1));
        assert_eq!(
            sha256_hex(&Value::Object(one)),
            sha256_hex(&Value::Object(two))
        );
    }

    #[test]
    fn strings_are_escaped_as_jcs_requires() {
        let value = json!({"s": "line\nbreak \"quoted\" \u{1} é"});
        assert_eq!(
            String::from_utf8(encode(&value)).unwrap(),
            "{\"s\":\"line\\nbreak \\\"quoted\\\" \\u0001 é\"}"
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // U+E000 sorts after U+1F600 in UTF-16 (a surrogate pair starts at 0xD83D).
        let value = json!({"\u{e000}": 1, "\u{1f600}": 2});
        let text = String::from_utf8(encode(&value)).unwrap();
        assert!(
            text.find('\u{1f600}').unwrap() < text.find('\u{e000}').unwrap(),
            "{text}"
        );
    }
}
