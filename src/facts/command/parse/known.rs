//! Which trees the gate reads at all: every named node of a kind it knows
//! how to read, no error or missing node, and nothing the grammar reads
//! otherwise than bash does. A command whose tree fails this is opaque.

use std::sync::OnceLock;

use tree_sitter::Language;

use super::super::kind::Kind;
use super::super::node::text;
use super::super::tree::{Flat, Node};

/// The named node kinds of tree-sitter-bash the gate knows how to read.
/// A tree with any other named node (an `ERROR`, a kind a newer grammar
/// adds, `$"..."` translation) is unparseable, so it is never allowed.
pub const KNOWN_NODE_KINDS: &[&str] = &[
    "ansi_c_string",
    "arithmetic_expansion",
    "array",
    "binary_expression",
    "brace_expression",
    "c_style_for_statement",
    "case_item",
    "case_statement",
    "command",
    "command_name",
    "command_substitution",
    "comment",
    "compound_statement",
    "concatenation",
    "declaration_command",
    "do_group",
    "elif_clause",
    "else_clause",
    "expansion",
    "extglob_pattern",
    "file_descriptor",
    "file_redirect",
    "for_statement",
    "function_definition",
    "heredoc_body",
    "heredoc_content",
    "heredoc_end",
    "heredoc_redirect",
    "heredoc_start",
    "herestring_redirect",
    "if_statement",
    "list",
    "negated_command",
    "number",
    "parenthesized_expression",
    "pipeline",
    "postfix_expression",
    "process_substitution",
    "program",
    "raw_string",
    "redirected_statement",
    "regex",
    "simple_expansion",
    "special_variable_name",
    "string",
    "string_content",
    "subscript",
    "subshell",
    "ternary_expression",
    "test_command",
    "test_operator",
    "unary_expression",
    "unset_command",
    "variable_assignment",
    "variable_assignments",
    "variable_name",
    "while_statement",
    "word",
];

/// `KNOWN_NODE_KINDS` by the grammar's numeric kind ids, built once:
/// checked for every node of every command.
pub(super) fn known_kind_ids() -> &'static [bool] {
    static KNOWN: OnceLock<Vec<bool>> = OnceLock::new();
    KNOWN.get_or_init(|| {
        let language: Language = tree_sitter_bash::LANGUAGE.into();
        // A kind name can have several ids (aliases): every named id whose
        // name is known counts.
        (0..language.node_kind_count())
            .map(|id| {
                u16::try_from(id).is_ok_and(|id| {
                    language.node_kind_is_named(id)
                        && language
                            .node_kind_for_id(id)
                            .is_some_and(|kind| KNOWN_NODE_KINDS.contains(&kind))
                })
            })
            .collect()
    })
}

/// Whether every named node of the tree is of a kind the gate reads, and
/// no expansion uses the `@P` (prompt) operator.
pub(super) fn only_known_nodes(tree: &Flat, source: &str) -> bool {
    let known = known_kind_ids();
    tree.nodes().all(|node| {
        // A `$` the grammar leaves as a bare token is a literal dollar to
        // bash (`a$`, `"5$"`, `a$}b`), which the grammar drops or splits
        // the word at: the words it reads are not the ones bash passes.
        if !node.is_named()
            && node.kind() == Kind::Dollar
            && node.parent().is_some_and(|parent| {
                matches!(
                    parent.kind(),
                    Kind::Concatenation | Kind::String | Kind::Command
                )
            })
        {
            return false;
        }
        if !node.is_named() && !node.is_broken() {
            return true;
        }
        node_is_read(node, known, source)
    })
}

/// Whether the gate reads a named (or broken) node as bash does.
fn node_is_read(node: Node<'_>, known: &[bool], source: &str) -> bool {
    let id = usize::from(node.kind_id());
    if node.is_broken() || !known.get(id).copied().unwrap_or(false) {
        return false;
    }
    match node.kind() {
        Kind::Expansion => !text(node, source).contains("@P"),
        // An unquoted word never holds a newline in bash, which ends
        // the command there; the grammar sometimes reads one into a
        // word (`ls a` newline `\d x`), hiding the next command.
        Kind::Word => !text(node, source).contains('\n'),
        // The grammar reads `wc - 2>&1` as `wc` with the redirect `2>&1`
        // and no node holds the `-` between them, which bash passes to
        // `wc` (found by the fuzz target's oracle), and `[ - 2>&1 ]` as a
        // test of nothing.
        Kind::Command
        | Kind::RedirectedStatement
        | Kind::TestCommand
        | Kind::Pipeline
        | Kind::DeclarationCommand
        | Kind::UnsetCommand
        | Kind::FileRedirect
        | Kind::HerestringRedirect => !loses_text(node, source),
        // Bash takes only digits that start a word for a redirect's
        // descriptor; the grammar also takes a word such as `-ab2` in
        // `echo x -ab2>/dev/null`, which bash passes as an argument
        // (found by the fuzz target's oracle).
        Kind::FileDescriptor => {
            let digits = text(node, source);
            !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
        }
        _ => true,
    }
}

/// Whether the grammar's reading of `node` loses text bash reads. Bash
/// splits words only at blanks (and before a redirect), and every other
/// byte belongs to a word or a redirect; so anything but blanks between
/// two parts, or around them, is a part the grammar dropped (`echo \\ d`
/// passes ` d` where the grammar reads `d`; `wc - 2>&1` passes `-` where
/// the grammar reads `wc` and the redirect), and in a simple command, two
/// words with nothing between them are one word to bash (`sort a]\\]b`
/// passes `a]]b`, where the grammar reads `a]` and `]b`).
fn loses_text(node: Node<'_>, source: &str) -> bool {
    let command = node.kind() == Kind::Command;
    // A simple command ends at a newline; a statement's parts, a
    // pipeline's or a test's may stand on several lines.
    let blank = |c: char| c == ' ' || c == '\t' || (c == '\n' && !command);
    let mut at = node.start_byte();
    let mut before = None;
    for next in node.children().map(Some).chain([None]) {
        let end = next.map_or(node.end_byte(), |part: Node<'_>| part.start_byte());
        let gap = source.get(at..end).unwrap_or("");
        let touching = command
            && gap.is_empty()
            && before
                .zip(next)
                .is_some_and(|(a, b)| one_word_to_bash(a, b));
        if touching || !gap.chars().all(blank) {
            return true;
        }
        if let Some(part) = next {
            at = part.end_byte();
            before = Some(part);
        }
    }
    false
}

/// Whether bash reads two parts of a simple command that touch as one
/// word. A word that touches the redirect before it ends that redirect's
/// word to bash: `cat <<< 'a'\b` reads the string `ab`, where the grammar
/// reads `'a'` and passes `b` to `cat` (found by the fuzz target's oracle).
/// A redirect's operator splits words, so a word may touch the redirect
/// after it (`echo x>out`). The grammar leaves a `==` or `=~` before a
/// word as a token of its own, which bash reads as part of the word it
/// touches: `awk =='NR1' f` passes `==NR1` (found by the fuzz target's
/// oracle).
fn one_word_to_bash(before: Node<'_>, after: Node<'_>) -> bool {
    let redirect = |node: Node<'_>| {
        matches!(
            node.kind(),
            Kind::FileRedirect | Kind::HeredocRedirect | Kind::HerestringRedirect
        )
    };
    let word =
        |node: Node<'_>| (node.is_named() && !redirect(node)) || node.kind() == Kind::MatchOperator;
    (before.is_named() || before.kind() == Kind::MatchOperator) && word(after)
}
