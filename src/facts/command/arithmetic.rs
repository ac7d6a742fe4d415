//! Arithmetic evaluation runs commands: bash evaluates a word read as a
//! number (`$((...))`, `((...))`, `$[...]`, `let`, `[[ x -eq y ]]`,
//! `test -v`, `declare`, `read` and `unset` of an array element) and an
//! array subscript in it is expanded, so `[ -v 'a[$(rm -rf ~)]' ]` runs
//! `rm` although every word of it is quoted. A command whose text holds a
//! subscript with a command substitution, or an arithmetic context with
//! one, is opaque: what it runs cannot be read from its words.

use std::sync::OnceLock;

use regex::Regex;

/// Whether `source` may run a command through arithmetic evaluation: a
/// subscript or arithmetic context with a substitution in the text, or
/// an arithmetic context beside data the command reads at run time (`read
/// x < f; echo $((x))`, `x=$(cat f); [[ $x -eq 1 ]]`), which may hold one.
pub fn may_run_commands(source: &str) -> bool {
    let [spelled_out, evaluates, reads_data] = patterns();
    // A pattern that does not compile counts on the strict side.
    let found = |pattern: &Option<Regex>| pattern.as_ref().is_none_or(|p| p.is_match(source));
    found(spelled_out) || (found(evaluates) && found(reads_data))
}

/// The three patterns, compiled once: a subscript or arithmetic context
/// holding a substitution in the text itself; an arithmetic context
/// (`$((...))`, `((...))`, `$[...]`, `let`, the numeric comparisons, `-v`);
/// data the command takes at run time (`read`, `mapfile`, a substitution).
fn patterns() -> &'static [Option<Regex>; 3] {
    static PATTERNS: OnceLock<[Option<Regex>; 3]> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        [
            concat!(
                // A subscript holding a command substitution, wherever it
                // stands: a literal, an assigned value, a here-string.
                r"\[[^\]]*(\$\(|`)",
                // An arithmetic context evaluating a substitution's output.
                r"|(\$\(\(|\(\(|\$\[)[^;&|]*(\$\(|`)",
                r"|(^|[;&|(\s])let\s[^;&|]*(\$\(|`)",
                r"|(\$\(|`)[^;&|]*\s-(eq|ne|lt|le|gt|ge)\s",
                r"|\s-(eq|ne|lt|le|gt|ge)\s+[^;&|]*(\$\(|`)",
            ),
            r"\$\(\(|\(\(|\$\[|(^|[;&|(\s])let\s|\s-(eq|ne|lt|le|gt|ge|v)\s",
            // `$(` but not `$((`, which is arithmetic.
            r"(^|[;&|(\s])(read|mapfile|readarray)\s|\$\([^(]|`",
        ]
        .map(|pattern| Regex::new(pattern).ok())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subscripts_and_arithmetic_with_substitutions_may_run_commands() {
        for source in [
            "[ -v 'a[$(rm -rf ~)]' ]",
            "[[ -v 'a[$(touch pwn)]' ]]",
            "test -v 'a[`touch x`]'",
            "[[ 'a[$(touch x)]' -eq 0 ]]",
            "echo $(( 'a[$(touch x)]' ))",
            "x='a[$(touch pwn)]'; echo $((x))",
            "read x <<< 'a[$(touch x)]'; : $((x))",
            "declare 'a[$(cmd)]=1'",
            "unset 'a[$(cmd)]'",
            "echo $(( $(cat README.md) ))",
            "let \"x=$(cat n.txt)\"",
            "[[ $(cat n.txt) -eq 1 ]]",
            "test 1 -lt `cat n.txt`",
            "read x < n.txt; echo $((x))",
            "x=$(cat n.txt); [[ $x -eq 1 ]]",
            "mapfile -t a < n.txt; (( a[0] ))",
            "while read n; do let total+=n; done < n.txt",
        ] {
            assert!(may_run_commands(source), "{source}");
        }
    }

    #[test]
    fn ordinary_arithmetic_and_tests_do_not() {
        for source in [
            "echo $((1 + 2))",
            "for ((i=0; i<3; i++)); do echo $i; done",
            "[[ -f README.md ]]",
            "test \"$x\" -eq 1",
            "echo $(date) [ok]",
            "ls [a-z]*.txt",
            "grep -n 'x[0-9]' README.md",
        ] {
            assert!(!may_run_commands(source), "{source}");
        }
    }
}
