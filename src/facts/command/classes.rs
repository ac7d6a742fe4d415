//! The command class table (`policies/commands.toml`): which classes a
//! program with its arguments falls in. The security team edits it; a new
//! class needs no Rust, only a rule here and a policy that names it.

use std::collections::BTreeSet;

use regex::Regex;
use serde::Deserialize;
use thiserror::Error;

/// The class of a command no rule matches. Policies ask about it.
pub const UNKNOWN: &str = "unknown";

#[derive(Debug, Error)]
pub enum CommandClassError {
    #[error("{file}: {message}")]
    Syntax { file: String, message: String },
    #[error("{file}: rule {index} (class `{class}`): {field}: {message}")]
    BadRegex {
        file: String,
        index: usize,
        class: String,
        field: &'static str,
        message: String,
    },
    #[error(
        "{file}: rule {index}: the class name `{class}` must be a lower-case identifier (a-z, 0-9, _)"
    )]
    BadName {
        file: String,
        index: usize,
        class: String,
    },
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TableFile {
    rule: Vec<RuleEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleEntry {
    class: String,
    /// Regex over the program's basename, anchored at both ends.
    program: String,
    /// Regex over the arguments joined by single spaces; the rule applies
    /// only when it matches somewhere.
    #[serde(default)]
    args: Option<String>,
    /// The rule does not apply when this matches the arguments.
    #[serde(default)]
    unless_args: Option<String>,
}

#[derive(Debug, Clone)]
struct Rule {
    class: String,
    program: Regex,
    args: Option<Regex>,
    unless_args: Option<Regex>,
}

#[derive(Debug, Clone)]
pub struct CommandClasses {
    rules: Vec<Rule>,
    names: BTreeSet<String>,
}

impl CommandClasses {
    pub fn parse(file: &str, text: &str) -> Result<Self, CommandClassError> {
        let table: TableFile = toml::from_str(text).map_err(|err| CommandClassError::Syntax {
            file: file.to_owned(),
            message: err.to_string().trim_end().to_owned(),
        })?;
        let mut rules = Vec::new();
        let mut names = BTreeSet::new();
        for (i, entry) in table.rule.into_iter().enumerate() {
            let index = i + 1;
            let valid = entry.class.starts_with(|c: char| c.is_ascii_lowercase())
                && entry
                    .class
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !valid {
                return Err(CommandClassError::BadName {
                    file: file.to_owned(),
                    index,
                    class: entry.class,
                });
            }
            let compile = |field: &'static str, pattern: &str| {
                Regex::new(pattern).map_err(|err| CommandClassError::BadRegex {
                    file: file.to_owned(),
                    index,
                    class: entry.class.clone(),
                    field,
                    message: err.to_string(),
                })
            };
            let program = compile("program", &format!("^(?:{})$", entry.program))?;
            let args = entry
                .args
                .as_deref()
                .map(|p| compile("args", p))
                .transpose()?;
            let unless_args = entry
                .unless_args
                .as_deref()
                .map(|p| compile("unless_args", p))
                .transpose()?;
            names.insert(entry.class.clone());
            rules.push(Rule {
                class: entry.class,
                program,
                args,
                unless_args,
            });
        }
        Ok(Self { rules, names })
    }

    /// The class names the table defines.
    pub fn names(&self) -> &BTreeSet<String> {
        &self.names
    }

    /// The classes of a program (its basename) with its arguments;
    /// `unknown` when no rule matches.
    pub fn classify(&self, program: &str, args: &[String]) -> BTreeSet<String> {
        let joined = args.join(" ");
        let mut classes: BTreeSet<String> = self
            .rules
            .iter()
            .filter(|rule| rule.program.is_match(program))
            .filter(|rule| rule.args.as_ref().is_none_or(|r| r.is_match(&joined)))
            .filter(|rule| {
                rule.unless_args
                    .as_ref()
                    .is_none_or(|r| !r.is_match(&joined))
            })
            .map(|rule| rule.class.clone())
            .collect();
        if classes.is_empty() {
            classes.insert(UNKNOWN.to_owned());
        }
        classes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Result<CommandClasses, CommandClassError> {
        CommandClasses::parse("commands.toml", text)
    }

    #[test]
    fn rules_match_program_and_arguments() {
        let t = table(
            "[[rule]]\nclass = \"vcs_read\"\nprogram = \"git\"\nargs = \"^status\"\n\
             [[rule]]\nclass = \"read_only\"\nprogram = \"ls|cat\"\nunless_args = \"secret\"\n",
        )
        .unwrap();
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(
            t.classify("git", &args(&["status"])),
            BTreeSet::from(["vcs_read".to_owned()])
        );
        assert_eq!(
            t.classify("git", &args(&["push"])),
            BTreeSet::from([UNKNOWN.to_owned()])
        );
        assert_eq!(
            t.classify("cat", &args(&["a"])),
            BTreeSet::from(["read_only".to_owned()])
        );
        assert_eq!(
            t.classify("cat", &args(&["secret"])),
            BTreeSet::from([UNKNOWN.to_owned()])
        );
        // The program pattern is anchored: `catalog` is not `cat`.
        assert_eq!(
            t.classify("catalog", &[]),
            BTreeSet::from([UNKNOWN.to_owned()])
        );
    }

    #[test]
    fn bad_tables_are_refused_with_the_file_and_rule() {
        assert!(matches!(
            table("[[rule]]\nclass = 1"),
            Err(CommandClassError::Syntax { .. })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"Bad\"\nprogram = \"x\""),
            Err(CommandClassError::BadName { index: 1, .. })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"x\"\nprogram = \"(\""),
            Err(CommandClassError::BadRegex {
                field: "program",
                ..
            })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"x\"\nprogram = \"x\"\nargs = \"[\""),
            Err(CommandClassError::BadRegex { field: "args", .. })
        ));
        assert!(matches!(
            table("[[rule]]\nclass = \"x\"\nprogram = \"x\"\nextra = 1"),
            Err(CommandClassError::Syntax { .. })
        ));
    }
}
