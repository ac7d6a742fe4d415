//! Line continuations as bash reads them: a backslash-newline outside
//! single quotes is removed before words are read, so `sort -\<newline>o
//! ../x` is `sort -o ../x` and `cat .e\<newline>nv` reads `.env`. The gate
//! joins them first, so that it judges the words bash will pass.
//!
//! Where the join depends on more than quotes (a comment, where bash keeps
//! the backslash and ends the comment at the newline; a heredoc, whose
//! body and end line follow other rules; `$'...'`, command substitutions
//! and backquotes, which nest quotes), the command is not joined and is
//! opaque: joining there could hide a line bash runs.

use std::borrow::Cow;

/// The command with its line continuations joined, or `None` when it
/// holds one where joining cannot be shown to read as bash reads.
pub fn join(source: &str) -> Option<Cow<'_, str>> {
    if !source.contains("\\\n") {
        return Some(Cow::Borrowed(source));
    }
    if source.contains('#')
        || source.contains("<<")
        || source.contains("$'")
        || source.contains("$(")
        || source.contains('`')
    {
        return None;
    }
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    let mut single = false;
    let mut double = false;
    while let Some(c) = chars.next() {
        if single {
            single = c != '\'';
            out.push(c);
            continue;
        }
        match c {
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(next) => {
                    out.push(c);
                    out.push(next);
                }
                None => out.push(c),
            },
            '\'' if !double => {
                single = true;
                out.push(c);
            }
            '"' => {
                double = !double;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    Some(Cow::Owned(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continuations_are_joined_outside_single_quotes() {
        assert_eq!(
            join("sort -\\\no ../x names.txt").unwrap(),
            "sort -o ../x names.txt"
        );
        assert_eq!(join("cat .e\\\nnv").unwrap(), "cat .env");
        assert_eq!(join("echo \"a\\\nb\"").unwrap(), "echo \"ab\"");
        assert_eq!(join("echo 'a\\\nb'").unwrap(), "echo 'a\\\nb'");
        assert_eq!(
            join("echo a\\\\\nb").unwrap(),
            "echo a\\\\\nb",
            "an escaped backslash ends the line"
        );
        assert_eq!(
            join("cargo test \\\n  --workspace").unwrap(),
            "cargo test   --workspace"
        );
        assert!(matches!(join("ls -la").unwrap(), Cow::Borrowed(_)));
    }

    #[test]
    fn where_joining_could_hide_a_line_the_command_is_not_joined() {
        for source in [
            "echo a # b \\\nrm -rf ..",
            "cat <<'EOF'\nfoo\\\nEOF\nrm -rf /",
            "echo $'a\\\nb'",
            "echo $(ls \\\n -a)",
            "echo `ls \\\n -a`",
        ] {
            assert!(join(source).is_none(), "{source:?}");
        }
        assert!(join("echo # no continuation here").is_some());
    }
}
