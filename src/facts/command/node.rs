//! How the walk reads a tree-sitter-bash node: its text, and the literal
//! word it stands for (quotes, escapes and `$'...'` decoded as bash
//! decodes them). Both the walk (`parse.rs`) and the variable tracking
//! (`values.rs`) read nodes this way; neither imports the other for it.

use super::kind::Kind;
use super::tree::Node;

pub(super) fn text<'a>(node: Node<'_>, source: &'a str) -> &'a str {
    source.get(node.byte_range()).unwrap_or("")
}

/// The literal value of a word, or `None` if it depends on the environment.
pub(super) fn literal(node: Node<'_>, source: &str) -> Option<String> {
    match node.kind() {
        Kind::Word | Kind::Number => Some(unescape(text(node, source))),
        // `{1..5}`: the words it becomes are the globs' business
        // (`globs::expand`), as for a `{a,b}` list inside a word.
        Kind::BraceExpression => Some(text(node, source).to_owned()),
        Kind::RawString => {
            let t = text(node, source);
            Some(t.get(1..t.len().saturating_sub(1)).unwrap_or("").to_owned())
        }
        Kind::AnsiCString => {
            let t = text(node, source);
            ansi_c(t.get(2..t.len().saturating_sub(1)).unwrap_or(""))
        }
        Kind::String => {
            let mut value = String::new();
            for part in string_parts(node, source)? {
                match part {
                    StringPart::Text(raw) => value.push_str(&unescape_double(raw)),
                    StringPart::Node(child) => match child.kind() {
                        Kind::StringContent => {
                            value.push_str(&unescape_double(text(child, source)));
                        }
                        _ => return None,
                    },
                }
            }
            Some(value)
        }
        Kind::Concatenation => {
            let mut value = String::new();
            for child in node.named_children() {
                value.push_str(&literal(child, source)?);
            }
            Some(value)
        }
        _ => None,
    }
}

/// A piece of a double-quoted string: text no node holds, or a node.
pub(super) enum StringPart<'t> {
    Text(&'t str),
    Node(Node<'t>),
}

/// A double-quoted string's pieces in order: its named children and the
/// text between them that tree-sitter gives to no node (whitespace alone:
/// `" "` has no `string_content`, and bash keeps the space). `None` for a
/// string that is not `"…"` as written.
pub(super) fn string_parts<'t>(node: Node<'t>, source: &'t str) -> Option<Vec<StringPart<'t>>> {
    let quoted = text(node, source);
    if quoted.len() < 2 || !quoted.starts_with('"') || !quoted.ends_with('"') {
        return None;
    }
    let end = node.end_byte() - 1;
    let mut at = node.start_byte() + 1;
    let mut parts = Vec::new();
    for child in node.named_children() {
        let gap = source.get(at..child.start_byte())?;
        if !gap.is_empty() {
            parts.push(StringPart::Text(gap));
        }
        parts.push(StringPart::Node(child));
        at = child.end_byte();
    }
    let gap = source.get(at..end)?;
    if !gap.is_empty() {
        parts.push(StringPart::Text(gap));
    }
    Some(parts)
}

fn unescape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(next) = chars.next().filter(|n| *n != '\n') {
                out.push(next);
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub(super) fn unescape_double(content: &str) -> String {
    let mut out = String::with_capacity(content.len());
    let mut chars = content.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) {
            if let Some(next) = chars.next() {
                out.push(next);
            }
        } else if c == '\\' && chars.peek() == Some(&'\n') {
            chars.next();
        } else {
            out.push(c);
        }
    }
    out
}

/// Decodes the escapes of `$'...'`, so `$'\x72m'` is judged as `rm`.
/// `None` when an octal or `\x` escape makes a byte past ASCII: bash
/// passes that byte raw (not the character of its value), which is no
/// text the gate can judge, so the word is unknown.
fn ansi_c(body: &str) -> Option<String> {
    let mut out = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\u{7}'),
            Some('b') => out.push('\u{8}'),
            Some('e' | 'E') => out.push('\u{1b}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some('\\') => out.push('\\'),
            Some('\'') => out.push('\''),
            Some('"') => out.push('"'),
            Some('?') => out.push('?'),
            // A hex escape without a digit is kept as written.
            Some(letter @ ('x' | 'u' | 'U')) => {
                let digits = match letter {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                match chars.peek().is_some_and(char::is_ascii_hexdigit) {
                    true => {
                        let decoded = radix(&mut chars, 16, digits);
                        if letter == 'x' && !decoded.is_ascii() {
                            return None;
                        }
                        out.push(decoded);
                    }
                    false => {
                        out.push('\\');
                        out.push(letter);
                    }
                }
            }
            // `\cX` is the control character of X.
            Some('c') => match chars.next() {
                Some(x) => out.push(char::from_u32(u32::from(x) & 0x1f).unwrap_or('\u{fffd}')),
                None => out.push_str("\\c"),
            },
            Some(d @ '0'..='7') => {
                let mut value = d.to_digit(8).unwrap_or(0);
                for _ in 0..2 {
                    match chars.peek().and_then(|c| c.to_digit(8)) {
                        Some(v) => {
                            value = value * 8 + v;
                            chars.next();
                        }
                        None => break,
                    }
                }
                if value > 0x7f {
                    return None;
                }
                out.push(char::from_u32(value).unwrap_or('\u{fffd}'));
            }
            // An escape bash does not know keeps its backslash.
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    // The word bash passes is a C string: it ends at a NUL (`$'\0x'`
    // is the empty word).
    if let Some(end) = out.find('\0') {
        out.truncate(end);
    }
    Some(out)
}

fn radix(chars: &mut std::iter::Peekable<std::str::Chars<'_>>, base: u32, max: usize) -> char {
    let mut value = 0u32;
    for _ in 0..max {
        match chars.peek().and_then(|c| c.to_digit(base)) {
            Some(v) => {
                value = value * base + v;
                chars.next();
            }
            None => break,
        }
    }
    char::from_u32(value).unwrap_or('\u{fffd}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ansi_c_strings_decode_as_bash_decodes_them() {
        let decoded = |body: &str| ansi_c(body).unwrap();
        assert_eq!(decoded(r"\x72m"), "rm");
        assert_eq!(decoded(r"a\Tb"), r"a\Tb");
        assert_eq!(decoded(r"1\uuu"), r"1\uuu");
        assert_eq!(decoded(r"\xg"), r"\xg");
        assert_eq!(decoded(r"\u0041\U00000042"), "AB");
        assert_eq!(decoded(r"\cA\\\'\?"), "\u{1}\\'?");
        assert_eq!(decoded(r"\177\x7f"), "\u{7f}\u{7f}");
        // Bytes past ASCII are passed raw by bash: not text to judge.
        for raw in [r"\255m", r"\xad", r"\x80", r"a\200"] {
            assert_eq!(ansi_c(raw), None, "{raw}");
        }
    }
}
