//! Words back into one shell line: how argv-form commands (`gate -- ...`,
//! a harness's exec form) reach the parser as the very words that run.

/// Quotes each word so a shell reads it back as the same word: plain words
/// as they are, the rest in single quotes.
pub fn shell_quote<S: AsRef<str>>(words: &[S]) -> String {
    words
        .iter()
        .map(|word| {
            let word = word.as_ref();
            let plain = !word.is_empty()
                && word
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                word.to_owned()
            } else {
                format!("'{}'", word.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_shell_syntax_are_quoted_whole() {
        assert_eq!(shell_quote(&["git", "log", "-n", "3"]), "git log -n 3");
        assert_eq!(
            shell_quote(&["echo", "a b", "it's", ""]),
            "echo 'a b' 'it'\\''s' ''"
        );
        assert_eq!(shell_quote(&["ls", "$(rm -rf /)"]), "ls '$(rm -rf /)'");
    }
}
