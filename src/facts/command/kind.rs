//! The node kinds of tree-sitter-bash the gate reads, by the grammar's
//! numeric ids: the flat tree (`tree.rs`) stores each node's kind once,
//! and every reader matches on it.

use std::sync::OnceLock;

use tree_sitter::Language;

/// The node kinds the walk reads, by name. tree-sitter's `Node::kind` would look the
/// name up, check it is UTF-8 and compare strings at every node; the walk
/// reads the kind of each node several times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    AnsiCString,
    ArithmeticExpansion,
    BraceExpression,
    Command,
    CommandName,
    CommandSubstitution,
    Comment,
    Concatenation,
    DeclarationCommand,
    Expansion,
    FileDescriptor,
    FileRedirect,
    ForStatement,
    FunctionDefinition,
    HeredocBody,
    HeredocRedirect,
    HerestringRedirect,
    Number,
    Pipeline,
    ProcessSubstitution,
    RawString,
    RedirectedStatement,
    SimpleExpansion,
    SpecialVariableName,
    String,
    StringContent,
    Subscript,
    TestCommand,
    UnsetCommand,
    VariableAssignment,
    VariableName,
    Word,
    /// A `$` the grammar leaves as a token of its own.
    Dollar,
    /// `==` or `=~` where the grammar expects a comparison: in a simple
    /// command bash reads it as a word like any other (`cat =~ x` reads a
    /// file named `=~`), which the grammar leaves as an unnamed token.
    MatchOperator,
    Other,
}

impl Kind {
    fn named(name: &str) -> Self {
        match name {
            "ansi_c_string" => Kind::AnsiCString,
            "arithmetic_expansion" => Kind::ArithmeticExpansion,
            "brace_expression" => Kind::BraceExpression,
            "command" => Kind::Command,
            "command_name" => Kind::CommandName,
            "command_substitution" => Kind::CommandSubstitution,
            "comment" => Kind::Comment,
            "concatenation" => Kind::Concatenation,
            "declaration_command" => Kind::DeclarationCommand,
            "expansion" => Kind::Expansion,
            "file_descriptor" => Kind::FileDescriptor,
            "file_redirect" => Kind::FileRedirect,
            "for_statement" => Kind::ForStatement,
            "function_definition" => Kind::FunctionDefinition,
            "heredoc_body" => Kind::HeredocBody,
            "heredoc_redirect" => Kind::HeredocRedirect,
            "herestring_redirect" => Kind::HerestringRedirect,
            "number" => Kind::Number,
            "pipeline" => Kind::Pipeline,
            "process_substitution" => Kind::ProcessSubstitution,
            "raw_string" => Kind::RawString,
            "redirected_statement" => Kind::RedirectedStatement,
            "simple_expansion" => Kind::SimpleExpansion,
            "special_variable_name" => Kind::SpecialVariableName,
            "string" => Kind::String,
            "string_content" => Kind::StringContent,
            "subscript" => Kind::Subscript,
            "test_command" => Kind::TestCommand,
            "unset_command" => Kind::UnsetCommand,
            "variable_assignment" => Kind::VariableAssignment,
            "variable_name" => Kind::VariableName,
            "word" => Kind::Word,
            "$" => Kind::Dollar,
            "==" | "=~" => Kind::MatchOperator,
            _ => Kind::Other,
        }
    }
}

/// Every kind id of the grammar as the walk reads it, built once: an id
/// maps to its name's `Kind`, so aliases (several ids of one name) read
/// alike, exactly as their names would.
fn kinds() -> &'static [Kind] {
    static KINDS: OnceLock<Vec<Kind>> = OnceLock::new();
    KINDS.get_or_init(|| {
        let language: Language = tree_sitter_bash::LANGUAGE.into();
        (0..language.node_kind_count())
            .map(|id| {
                u16::try_from(id)
                    .ok()
                    .and_then(|id| language.node_kind_for_id(id))
                    .map_or(Kind::Other, Kind::named)
            })
            .collect()
    })
}

pub(super) fn kind_of_id(id: u16) -> Kind {
    kinds().get(usize::from(id)).copied().unwrap_or(Kind::Other)
}
