//! What the gate knows of the values a command's words expand to.
//!
//! A read-only program is harmless only with harmless operands: `cat
//! "$f"` reads whatever `f` holds, and `echo "$GITHUB_TOKEN"` prints a
//! secret as surely as `printenv` does. So every variable a command's
//! words (or its here-string or heredoc) expand is traced to where the
//! text gives it a value: a literal (judged as a word where it is
//! assigned, so `f=.env` is a secret), data (what `read` took from stdin,
//! a substitution's output), or nothing the gate can follow. A variable the
//! text does not assign before its use comes from the environment.

use super::tree::Node;

use super::kind::Kind;
use super::node::{literal, text};

/// A value in a command's words that the text does not spell out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expanded {
    /// A variable the text does not assign before this use.
    Environment(String),
    /// Data: what `read` took from stdin, or a substitution's output (the
    /// commands that produce it are judged themselves). Harmless to print,
    /// unknown as a name.
    Data,
    /// A value the gate cannot follow: an indirect or modified expansion,
    /// an assignment from another variable.
    Unknown,
}

/// Where an assignment's value comes from, from the most to the least
/// known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    Literal,
    Data,
    Unknown,
}

/// An expansion found in the text, before the assignments are all known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Use {
    Variable { name: String, at: usize },
    Output,
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Assigned {
    name: String,
    at: usize,
    origin: Origin,
    /// The literal value, when the text spells it out.
    value: Option<String>,
}

/// Every assignment in one piece of shell text, with where it stands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Values {
    assigned: Vec<Assigned>,
}

impl Values {
    pub fn assign(&mut self, name: &str, at: usize, origin: Origin) {
        self.assign_value(name, at, origin, None);
    }

    /// As `assign`, with the literal value when the text spells it out.
    pub fn assign_value(&mut self, name: &str, at: usize, origin: Origin, value: Option<String>) {
        self.assigned.push(Assigned {
            name: name.to_owned(),
            at,
            origin,
            value,
        });
    }

    /// The value `name` has at `at` when the text can only give it one:
    /// assigned before, and every assignment of it anywhere (a loop may
    /// run a later one first) the same literal.
    pub fn literal_value(&self, name: &str, at: usize) -> Option<&str> {
        let mut mine = self.assigned.iter().filter(|a| a.name == name).peekable();
        mine.peek()?;
        let mut value: Option<&str> = None;
        let mut before = false;
        for assigned in mine {
            let this = assigned.value.as_deref()?;
            if value.is_some_and(|v| v != this) {
                return None;
            }
            value = Some(this);
            before |= assigned.at < at;
        }
        value.filter(|_| before)
    }

    /// Whether the text assigns `name` anywhere.
    pub fn assigns(&self, name: &str) -> bool {
        self.assigned.iter().any(|a| a.name == name)
    }

    /// What each use expands to. A variable assigned only after its use
    /// comes from the environment there; one assigned before takes the
    /// least known of all its assignments (a loop may run a later one
    /// first, a branch may skip one).
    pub fn resolve(&self, uses: &[Use]) -> Vec<Expanded> {
        let mut expanded = Vec::new();
        for found in uses {
            let value = match found {
                Use::Output => Some(Expanded::Data),
                Use::Unknown => Some(Expanded::Unknown),
                Use::Variable { name, at } => {
                    let mine = || self.assigned.iter().filter(|a| a.name == *name);
                    if mine().any(|a| a.at < *at) {
                        match mine().map(|a| a.origin).max() {
                            Some(Origin::Data) => Some(Expanded::Data),
                            Some(Origin::Unknown) => Some(Expanded::Unknown),
                            Some(Origin::Literal) | None => None,
                        }
                    } else {
                        Some(Expanded::Environment(name.clone()))
                    }
                }
            };
            if let Some(value) = value.filter(|v| !expanded.contains(v)) {
                expanded.push(value);
            }
        }
        expanded
    }
}

/// The shell's own parameters (`$?`, `$#`, `$1`, `$@`, ...): a number, the
/// shell's name, or the arguments of a script or function, which are
/// judged where they are written.
fn special(name: &str) -> bool {
    matches!(name, "@" | "*" | "#" | "?" | "-" | "$" | "!" | "_")
        || name.chars().all(|c| c.is_ascii_digit())
}

/// Collects the expansions in a word (or a heredoc body), without going
/// into substitutions: their commands are judged on their own, and only
/// their output lands here.
pub fn uses_in(node: Node<'_>, source: &str, out: &mut Vec<Use>) {
    match node.kind() {
        Kind::SimpleExpansion => {
            if let Some(name) = node.named_child(0).map(|n| text(n, source))
                && !special(name)
            {
                out.push(Use::Variable {
                    name: name.to_owned(),
                    at: node.start_byte(),
                });
            }
        }
        Kind::Expansion => match plain_expansion(node, source) {
            Some(name) if special(name) => {}
            Some(name) => out.push(Use::Variable {
                name: name.to_owned(),
                at: node.start_byte(),
            }),
            // `${x:-.env}`, `${!x}`, `${a[@]}`, `${x/a/b}`: not followed.
            None => out.push(Use::Unknown),
        },
        Kind::CommandSubstitution => out.push(Use::Output),
        // `<(cmd)` names a pipe that carries the output of commands judged
        // on their own, not a file the output names.
        Kind::ProcessSubstitution => {}
        // `$((...))` is a number.
        Kind::ArithmeticExpansion => {}
        _ => {
            for child in node.children() {
                uses_in(child, source, out);
            }
        }
    }
}

/// The variable of a `${NAME}` with no operator.
fn plain_expansion<'a>(node: Node<'_>, source: &'a str) -> Option<&'a str> {
    let name = node
        .named_child(0)
        .filter(|_| node.named_child_count() == 1)?;
    if !matches!(name.kind(), Kind::VariableName | Kind::SpecialVariableName) {
        return None;
    }
    let name = text(name, source);
    (text(node, source) == format!("${{{name}}}")).then_some(name)
}

/// Where an assigned value comes from: a literal, only substitutions'
/// output, or something the gate cannot follow.
pub fn origin_of(value: Option<Node<'_>>, source: &str) -> Origin {
    let Some(value) = value else {
        return Origin::Literal;
    };
    if literal(value, source).is_some() {
        return Origin::Literal;
    }
    let mut uses = Vec::new();
    uses_in(value, source, &mut uses);
    if !uses.is_empty() && uses.iter().all(|u| *u == Use::Output) {
        Origin::Data
    } else {
        Origin::Unknown
    }
}

/// The variables `read` assigns: its operands and the value of `-a`.
pub fn read_variables(words: &[Option<String>]) -> Vec<String> {
    let mut names = Vec::new();
    let mut index = 0;
    while index < words.len() {
        let Some(word) = words[index].as_deref() else {
            index += 1;
            continue;
        };
        index += 1;
        if let Some(flags) = word.strip_prefix('-').filter(|f| !f.is_empty()) {
            // The last flag of a cluster may take the next word.
            match flags.chars().last() {
                Some('a') => {
                    names.extend(words.get(index).cloned().flatten());
                    index += 1;
                }
                Some('d' | 'i' | 'n' | 'N' | 'p' | 't' | 'u') => index += 1,
                _ => {}
            }
        } else {
            names.push(word.to_owned());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::super::parse::parse;
    use super::*;

    /// What each command of `source` expands, by its program.
    fn expanded(source: &str) -> Vec<(String, Vec<Expanded>)> {
        parse(source)
            .commands
            .into_iter()
            .map(|c| (c.words[0].clone().unwrap_or_default(), c.expanded))
            .collect()
    }

    fn of(source: &str, program: &str) -> Vec<Expanded> {
        expanded(source)
            .into_iter()
            .find(|(p, _)| p == program)
            .map(|(_, e)| e)
            .unwrap_or_else(|| panic!("no {program} in {source}"))
    }

    fn env(name: &str) -> Expanded {
        Expanded::Environment(name.to_owned())
    }

    #[test]
    fn a_variable_the_text_does_not_assign_first_comes_from_the_environment() {
        assert_eq!(of(r#"cat "$HOME/x""#, "cat"), [env("HOME")]);
        assert_eq!(of("echo ${TOKEN}", "echo"), [env("TOKEN")]);
        assert_eq!(of(r#"echo "$x"; x=1"#, "echo"), [env("x")]);
        assert_eq!(of("wc -c <<< \"$T\"", "wc"), [env("T")]);
        assert_eq!(of("cat <<EOF\n$T\nEOF\n", "cat"), [env("T")]);
        // A prefix assignment sets the program's environment, not its words.
        assert_eq!(of(r#"F=a cat "$F""#, "cat"), [env("F")]);
    }

    #[test]
    fn assigned_values_are_traced_to_their_origin() {
        assert_eq!(of(r#"f=a.txt; cat "$f""#, "cat"), []);
        assert_eq!(of(r#"for f in *.rs a.md; do wc -l "$f"; done"#, "wc"), []);
        assert_eq!(of(r#"export F=a; echo "$F""#, "echo"), []);
        assert_eq!(
            of(r#"while read l; do echo "$l"; done < in"#, "echo"),
            [Expanded::Data]
        );
        assert_eq!(of(r#"x=$(pwd); cat "$x""#, "cat"), [Expanded::Data]);
        assert_eq!(of(r#"cat "$(pwd)""#, "cat"), [Expanded::Data]);
        // From another variable, or in a loop over the arguments: not followed.
        assert_eq!(of(r#"x=$HOME/a; cat "$x""#, "cat"), [Expanded::Unknown]);
        assert_eq!(
            of(r#"for f; do cat "$f"; done"#, "cat"),
            [Expanded::Unknown]
        );
        // The least known assignment counts: a later one may run first in a loop.
        assert_eq!(
            of(r#"f=a; while true; do cat "$f"; f=$(pwd); done"#, "cat"),
            [Expanded::Data]
        );
    }

    #[test]
    fn modified_and_indirect_expansions_are_not_followed() {
        for source in [
            r#"echo "${x:-.env}""#,
            r#"echo "${!x}""#,
            r#"echo "${!GITHUB*}""#,
            r#"echo "${a[@]}""#,
            r#"echo "${x/a/b}""#,
        ] {
            assert_eq!(of(source, "echo"), [Expanded::Unknown], "{source}");
        }
    }

    #[test]
    fn the_shells_own_parameters_and_numbers_need_no_tracing() {
        for source in [
            r#"echo "$1" "$@" "$#" "$?" $$"#,
            "echo $((1 + 2))",
            "cat <(ls)",
            "echo '$T'",
            "cat <<'EOF'\n$T\nEOF\n",
        ] {
            let program = if source.starts_with("cat") {
                "cat"
            } else {
                "echo"
            };
            assert_eq!(of(source, program), [], "{source}");
        }
    }

    #[test]
    fn a_redirect_of_a_compound_statement_reaches_every_command_in_it() {
        let found = expanded(r#"while read l; do echo "$l"; done <<< "$T""#);
        assert!(
            found.iter().all(|(_, e)| e.contains(&env("T"))),
            "{found:?}"
        );
    }

    #[test]
    fn read_assigns_its_operands_and_the_array_of_a() {
        let words = |ws: &[&str]| ws.iter().map(|w| Some((*w).to_owned())).collect::<Vec<_>>();
        assert_eq!(read_variables(&words(&["-r", "line"])), ["line"]);
        assert_eq!(
            read_variables(&words(&["-p", "name?", "a", "b"])),
            ["a", "b"]
        );
        assert_eq!(read_variables(&words(&["-ra", "arr"])), ["arr"]);
        assert_eq!(read_variables(&[None, Some("x".into())]), ["x"]);
    }
}
