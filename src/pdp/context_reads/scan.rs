//! What a policy reads of `context`, from the tokens of its text. Cedar
//! names the request's context only by the variable `context`, so a
//! policy's reads are where that word stands as a variable and what
//! follows it: `.name`, `["name"]` or `has name` read that attribute;
//! any other use (the record compared whole, passed to an operator) reads
//! all of it. The walk of Cedar's JSON form ([`super::ContextReads::of_form`])
//! is this scan's oracle; the scan is what a decision pays, because the
//! JSON form of a policy parsed from text takes Cedar a second parse of
//! that text (more than half of a hook's first decision).
//!
//! The scan may say a policy reads more than it does (a `context` inside
//! a record literal's key reads all), never less; where it cannot be sure
//! of a name (a string with escapes), it gives up and the oracle decides.

use super::ContextReads;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token<'a> {
    Ident(&'a str),
    /// A string's text between its quotes, with no escape in it.
    Plain(&'a str),
    /// A string with an escape: its value is not its text.
    Escaped,
    Punct(u8),
}

/// The tokens of Cedar text that matter here, comments and whitespace
/// left out; `None` for a string that never ends.
fn tokens(text: &str) -> Option<Vec<Token<'_>>> {
    let bytes = text.as_bytes();
    let mut tokens = Vec::new();
    let mut at = 0;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'/' if bytes.get(at + 1) == Some(&b'/') => {
                at = text[at..]
                    .find('\n')
                    .map_or(bytes.len(), |end| at + end + 1);
            }
            b'"' => {
                let start = at + 1;
                let mut end = start;
                let mut escaped = false;
                loop {
                    match bytes.get(end)? {
                        b'"' => break,
                        b'\\' => {
                            escaped = true;
                            end += 2;
                        }
                        _ => end += 1,
                    }
                }
                tokens.push(if escaped {
                    Token::Escaped
                } else {
                    Token::Plain(&text[start..end])
                });
                at = end + 1;
            }
            b'_' | b'a'..=b'z' | b'A'..=b'Z' => {
                let end = bytes[at..]
                    .iter()
                    .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_'))
                    .map_or(bytes.len(), |length| at + length);
                tokens.push(Token::Ident(&text[at..end]));
                at = end;
            }
            byte if byte.is_ascii_whitespace() => at += 1,
            byte => {
                tokens.push(Token::Punct(byte));
                at += 1;
            }
        }
    }
    Some(tokens)
}

/// What `text` (one policy) reads of `context`; `None` when the scan
/// cannot say and the oracle must.
pub(super) fn scanned(text: &str) -> Option<ContextReads> {
    let tokens = tokens(text)?;
    let mut reads = ContextReads::default();
    for (at, token) in tokens.iter().enumerate() {
        if *token != Token::Ident("context") {
            continue;
        }
        let before = at.checked_sub(1).and_then(|before| tokens.get(before));
        // An attribute or an annotation named `context`, not the variable.
        if matches!(
            before,
            Some(Token::Punct(b'.' | b'@')) | Some(Token::Ident("has"))
        ) {
            continue;
        }
        let after = |step: usize| tokens.get(at + step).copied();
        let name = match (after(1), after(2), after(3)) {
            (Some(Token::Punct(b'.')), Some(Token::Ident(name)), next)
                if next != Some(Token::Punct(b'(')) =>
            {
                Some(name)
            }
            (Some(Token::Punct(b'[')), Some(Token::Plain(name)), Some(Token::Punct(b']'))) => {
                Some(name)
            }
            // `has a.b` reads `a`; Cedar's JSON form names the path, which
            // the oracle takes for all of the record: so does the scan.
            (Some(Token::Ident("has")), Some(Token::Ident(name) | Token::Plain(name)), next)
                if next != Some(Token::Punct(b'.')) =>
            {
                Some(name)
            }
            (Some(Token::Punct(b'[') | Token::Ident("has")), Some(Token::Escaped), _) => {
                return None;
            }
            _ => None,
        };
        match name {
            Some(name) => {
                reads.names.insert(name.to_owned());
            }
            None => reads.whole = true,
        }
    }
    Some(reads)
}

#[cfg(test)]
mod tests {
    use cedar_policy::{Policy, PolicySet};

    use super::*;

    /// The oracle's answer and the scan's for one policy's text.
    fn both(text: &str) -> (ContextReads, Option<ContextReads>) {
        let policy = Policy::parse(None, text).unwrap();
        (ContextReads::of_form(&policy), scanned(text))
    }

    fn conditions(conditions: &str) -> String {
        format!("permit (principal, action, resource) {conditions};")
    }

    /// The scan says what the oracle says on every shape a policy reads
    /// the context in, and gives up only where it says it would.
    #[test]
    fn the_scan_agrees_with_cedars_json_form() {
        for text in [
            "",
            "when { context.approved }",
            "unless { context.approval_channel == \"client_elicitation\" }",
            "when { context has approved && context.approved }",
            "when { context has \"approved\" }",
            "when { context[\"approved\"] }",
            "when { context[\"an odd name\"] == 1 }",
            "when { context has input.path && context.input.path like \"*.rs\" }",
            "when { context.path_classes.contains(\"secrets\") }",
            "when { context == {\"approved\": true} }",
            "when { [context].contains({}) }",
            "when { if context.approved then true else context.transport == \"stdio\" }",
            "when { principal.context == 1 && resource has context }",
            "when { principal[\"context\"] == context.x }",
            "when { \"context\" == \"context.approved\" } // context.approved\n",
            "when { context.x } unless { context has y || context[\"z\"] }",
            "when { context . spaced }",
            "when { context\n.on_another_line }",
            "when { context }",
            "when { !context.approved }",
            "when { context.a.b.c == context.d[\"e\"] }",
        ] {
            let text = conditions(text);
            let (oracle, scanned) = both(&text);
            assert_eq!(scanned, Some(oracle), "{text}");
        }
    }

    /// Where the scan reads more than the oracle, it only ever reads more:
    /// an attribute the oracle finds is found, and a whole read stays whole.
    #[test]
    fn the_scan_never_reads_less_than_the_oracle() {
        for text in [
            "when { context[\"approved\"].x }",
            "when { {context: 1}.context == 1 }",
            "@context(\"x\") permit (principal, action, resource) when { context.y };",
        ] {
            let text = if text.starts_with('@') {
                text.to_owned()
            } else {
                conditions(text)
            };
            let (oracle, scanned) = both(&text);
            let scanned = scanned.unwrap();
            assert!(!oracle.whole || scanned.whole, "{text}");
            assert!(
                oracle.names.iter().all(|name| scanned.reads(name)),
                "{text}: {oracle:?} {scanned:?}"
            );
        }
    }

    fn fragment(shape: usize, name: &str) -> String {
        match shape {
            0 => format!("context.{name} == 1"),
            1 => format!("context has {name}"),
            2 => format!("context[\"{name}\"] == true"),
            3 => format!("context has \"{name}\""),
            4 => format!("context.{name}.inner.contains(1)"),
            5 => format!("context has {name}.inner"),
            6 => "context == {}".to_owned(),
            7 => format!("principal.{name} == \"context.{name}\""),
            8 => format!("resource has context && resource.context.{name}"),
            9 => format!("{{context: 1, {name}: 2}}.{name} == 2"),
            10 => format!("[context.{name}, context][0] == 1"),
            _ => format!("if context.{name} then context[\"{name}\"] else false"),
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Whatever a policy's conditions make of the context, the scan
        /// reads at least what the oracle reads.
        #[test]
        fn whatever_the_conditions_the_scan_reads_at_least_what_the_oracle_reads(
            parts in proptest::collection::vec((0usize..12, "[a-z_][a-z0-9_]{0,6}", proptest::bool::ANY), 1..6),
            comment in proptest::bool::ANY,
        ) {
            let joined: Vec<String> = parts
                .iter()
                .map(|(shape, name, or)| format!("{} {}", fragment(*shape, name), if *or { "||" } else { "&&" }))
                .collect();
            let mut body = joined.join(" ");
            body.push_str(" true");
            if comment {
                body.push_str(" // context.hidden\n");
            }
            let text = conditions(&format!("when {{ {body} }}"));
            let Ok(policy) = Policy::parse(None, &text) else {
                return Ok(());
            };
            let oracle = ContextReads::of_form(&policy);
            let scanned = scanned(&text).unwrap();
            proptest::prop_assert!(!oracle.whole || scanned.whole, "{}", text);
            proptest::prop_assert!(
                oracle.names.iter().all(|name| scanned.reads(name)),
                "{}: {:?} {:?}", text, oracle, scanned
            );
            proptest::prop_assert!(!scanned.reads("hidden") || scanned.whole, "{}", text);
        }
    }

    /// A name given with an escape is left to the oracle, which reads the
    /// string's value; an unfinished string cannot be scanned.
    #[test]
    fn the_scan_gives_up_where_it_cannot_read_a_name() {
        let escaped = conditions("when { context[\"appro\\u{76}ed\"] }");
        assert_eq!(scanned(&escaped), None, "{escaped}");
        assert!(both(&escaped).0.reads_approval(), "{escaped}");
        let quoted = conditions("when { context has \"a\\\"b\" }");
        assert_eq!(scanned(&quoted), None, "{quoted}");
        assert_eq!(scanned("when { context[\"never ends }"), None);
    }

    /// Every policy shipped, and every policy of the repository's example
    /// and test trees, scans to what the oracle reads.
    #[test]
    fn every_shipped_policy_scans_as_the_oracle_reads_it() {
        let mut checked = 0;
        let manifest = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut folders = vec![manifest.join("policies"), manifest.join("src/pdp")];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.extension().is_some_and(|ext| ext == "cedar") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let Ok(set) = text.parse::<PolicySet>() else {
                        continue;
                    };
                    for policy in set.policies() {
                        let own = policy.to_cedar().unwrap();
                        assert_eq!(
                            scanned(&own),
                            Some(ContextReads::of_form(policy)),
                            "{}: {own}",
                            path.display()
                        );
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked >= 16, "only {checked} policies found");
    }
}
