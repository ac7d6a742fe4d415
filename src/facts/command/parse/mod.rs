//! Shell source to simple commands, with tree-sitter-bash.
//!
//! Every `command` node anywhere in the tree is a simple command: inside
//! `;`, `&&`, `||`, pipelines, `&`, subshells, `{ }` groups, `$(...)`,
//! backticks, process substitution, `if`/`for`/`while`/`case` bodies and
//! function bodies. A word the parser cannot reduce to a literal (a
//! variable, a substitution) is kept as `None`: in command position it
//! makes the command opaque.

mod known;

pub use known::KNOWN_NODE_KINDS;
use known::only_known_nodes;

use std::cell::RefCell;

use tree_sitter::{Parser, Tree};

use super::kind::Kind;
use super::node::{StringPart, literal, string_parts, text, unescape_double};
use super::tree::{Flat, Node};
use super::values::{Expanded, Origin, Use, Values, origin_of, read_variables, uses_in};

/// Longest command text accepted, in bytes.
pub const MAX_COMMAND_BYTES: usize = 16 * 1024;
/// Deepest nesting of `bash -c`, `eval` and heredocs followed.
pub const MAX_DEPTH: usize = 8;
/// An argument that is not a literal and may split into several words
/// (an unquoted expansion or substitution). A source literal that happens
/// to read the same is only judged more strictly.
pub const UNQUOTED_EXPANSION: &str = "$?";
/// The mark in front of an argument that is a double-quoted string with an
/// expansion inside: one word, of unknown text. The string's source text
/// follows the mark, so a rule still reads what it names (`"$HOME/.ssh/x"`).
pub const QUOTED_EXPANSION: &str = "\"$…\"";

/// Whether an argument is one word of unknown text.
pub fn is_quoted_expansion(word: &str) -> bool {
    word.starts_with(QUOTED_EXPANSION)
}

/// One simple command as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Simple {
    /// The words; `None` where a word is not a literal.
    pub words: Vec<Option<String>>,
    /// Text fed to this command's stdin by a heredoc or here-string.
    pub stdin_text: Option<String>,
    /// Whether this command reads its stdin from a pipe.
    pub piped_into: bool,
    /// Variables assigned in front of it (`VAR=x cmd`).
    pub assignments: Vec<String>,
    /// What its words, here-string and heredoc expand that the text does
    /// not spell out.
    pub expanded: Vec<Expanded>,
}

/// What the parser found in a piece of shell text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    pub commands: Vec<Simple>,
    /// Targets of output redirections; `None` where not a literal.
    pub writes: Vec<Option<String>>,
    /// Sources of input redirections; `None` where not a literal.
    pub reads: Vec<Option<String>>,
    /// Variables assigned by a statement of their own or a `for` loop.
    pub assignments: Vec<String>,
    /// Names of functions the text defines.
    pub functions: Vec<String>,
    /// Literal words the text names outside a command's arguments: values
    /// it assigns, `for` lists. Secrets are judged in them as in arguments.
    pub named_words: Vec<String>,
    /// The text did not parse cleanly, or holds something the gate does
    /// not read (an unknown node kind, a `${var@P}` prompt expansion, which
    /// runs the substitutions in the variable's value).
    pub unparseable: bool,
    /// Every assignment, for tracing the expansions.
    values: Values,
    /// Expansions by the index of the command they belong to, resolved once
    /// every assignment is known.
    uses: Vec<(usize, Vec<Use>)>,
    /// Expansions in a redirect of a compound statement (`while read l;
    /// do ...; done <<< "$X"`): they reach every command of the text.
    statement_uses: Vec<Use>,
    /// Write targets spelt with variables (`> "$x"`, `> "${HOME}/.bashrc"`),
    /// by their place in `writes`: resolved once every assignment is known.
    pending_writes: Vec<(usize, Vec<Piece>)>,
}

/// A piece of a word spelt with variables.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Variable { name: String, at: usize },
}

/// A word as text and plain variables (`"$x/out"`, `${HOME}/.bashrc`), or
/// `None` when it holds anything else.
fn pieces(node: Node<'_>, source: &str) -> Option<Vec<Piece>> {
    let variable = |name: &str, at: usize| Piece::Variable {
        name: name.to_owned(),
        at,
    };
    match node.kind() {
        Kind::SimpleExpansion => {
            let name = node.named_child(0).map(|n| text(n, source))?;
            name.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
                .then(|| vec![variable(name, node.start_byte())])
        }
        Kind::Expansion => {
            let name = node
                .named_child(0)
                .filter(|_| node.named_child_count() == 1)?;
            let name = text(name, source);
            (text(node, source) == format!("${{{name}}}")
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
            .then(|| vec![variable(name, node.start_byte())])
        }
        Kind::String => {
            let mut out = Vec::new();
            for part in string_parts(node, source)? {
                match part {
                    StringPart::Text(raw) => out.push(Piece::Text(unescape_double(raw))),
                    StringPart::Node(child) if child.kind() == Kind::StringContent => {
                        out.push(Piece::Text(unescape_double(text(child, source))));
                    }
                    StringPart::Node(child) => out.extend(pieces(child, source)?),
                }
            }
            Some(out)
        }
        Kind::Concatenation => {
            let mut out = Vec::new();
            for child in node.named_children() {
                out.extend(pieces(child, source)?);
            }
            Some(out)
        }
        _ => literal(node, source).map(|text| vec![Piece::Text(text)]),
    }
}

/// The text of `pieces` once each variable has the one value the text
/// gives it, or (`HOME` leading the word, assigned nowhere in the text)
/// `~`, which the path facts expand to the home folder the command runs
/// with.
fn resolved(pieces: &[Piece], values: &Values) -> Option<String> {
    let mut out = String::new();
    for (index, piece) in pieces.iter().enumerate() {
        match piece {
            Piece::Text(text) => out.push_str(text),
            Piece::Variable { name, at } => match values.literal_value(name, *at) {
                Some(value) => out.push_str(value),
                None if name == "HOME" && index == 0 && !values.assigns(name) => {
                    let next = pieces.get(1);
                    if !next.is_none_or(|p| matches!(p, Piece::Text(t) if t.starts_with('/'))) {
                        return None;
                    }
                    out.push('~');
                }
                None => return None,
            },
        }
    }
    Some(out)
}

thread_local! {
    /// One parser per thread: building one and loading the grammar costs
    /// more than parsing a typical command.
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn parse_tree(source: &str) -> Option<Tree> {
    PARSER.with(|cell| {
        let mut slot = cell.try_borrow_mut().ok()?;
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .ok()?;
            *slot = Some(parser);
        }
        slot.as_mut()?.parse(source, None)
    })
}

pub fn parse(source: &str) -> Parsed {
    let Some(tree) = parse_tree(source) else {
        return Parsed {
            unparseable: true,
            ..Parsed::default()
        };
    };
    let flat = Flat::of(&tree);
    let mut parsed = Parsed {
        // Bash splits words at spaces, tabs and newlines only; the grammar
        // also at a form feed, a vertical tab and a carriage return.
        unparseable: tree.root_node().has_error()
            || source.contains(['\u{b}', '\u{c}', '\r'])
            || !only_known_nodes(&flat, source),
        ..Parsed::default()
    };
    walk(flat.root(), source, &mut parsed, false);
    for (index, spelt) in std::mem::take(&mut parsed.pending_writes) {
        if let Some(target) = resolved(&spelt, &parsed.values)
            && let Some(slot) = parsed.writes.get_mut(index)
        {
            *slot = Some(target);
        }
    }
    let everywhere = parsed.values.resolve(&parsed.statement_uses);
    for (index, uses) in std::mem::take(&mut parsed.uses) {
        let mut expanded = parsed.values.resolve(&uses);
        expanded.extend(everywhere.iter().cloned());
        if let Some(command) = parsed.commands.get_mut(index) {
            command.expanded = expanded;
        }
    }
    parsed
}

fn walk(node: Node<'_>, source: &str, out: &mut Parsed, piped_into: bool) {
    match node.kind() {
        Kind::Command => {
            push_simple(node, source, piped_into, None, Vec::new(), out);
            walk_words(node, source, out);
        }
        Kind::RedirectedStatement => walk_redirected(node, source, out, piped_into),
        Kind::Pipeline => {
            let mut first = true;
            for child in node.named_children() {
                walk(child, source, out, !first || piped_into);
                first = false;
            }
        }
        Kind::FileRedirect => redirect(node, source, out),
        Kind::VariableAssignment => {
            if let Some(name) = assigned_name(node, source) {
                assign(node, &name, source, out);
                out.assignments.push(name);
            }
            walk_children(node, source, out, piped_into);
        }
        Kind::ForStatement => {
            walk_for(node, source, out);
            walk_children(node, source, out, piped_into);
        }
        Kind::FunctionDefinition => {
            if let Some(name) = node.child_by_field_name("name") {
                out.functions
                    .push(literal(name, source).unwrap_or_else(|| text(name, source).to_owned()));
            }
            walk_children(node, source, out, piped_into);
        }
        // `[ ... ]`, `[[ ... ]]` and `export`/`declare`/`local`/`readonly`
        // are commands too, though the grammar names them apart.
        Kind::TestCommand | Kind::DeclarationCommand | Kind::UnsetCommand => {
            walk_keyword_command(node, source, out, piped_into);
        }
        _ => walk_children(node, source, out, piped_into),
    }
}

/// Substitutions inside a command's words are commands too.
fn walk_words(command: Node<'_>, source: &str, out: &mut Parsed) {
    for child in command.children() {
        walk_inner(child, source, out);
    }
}

/// A statement with redirects: its stdin (a heredoc, a here-string, or
/// other commands' output: `< <(cmd)`, `<<< "$(cmd)"`, which feed the
/// body as a pipe would), its file redirects, then its body.
fn walk_redirected(node: Node<'_>, source: &str, out: &mut Parsed, piped_into: bool) {
    let mut stdin_text = None;
    let mut stdin_uses = Vec::new();
    let mut fed = piped_into;
    for child in node.children() {
        match child.kind() {
            Kind::HeredocRedirect => {
                stdin_text = heredoc_body(child, source);
                uses_in(child, source, &mut stdin_uses);
            }
            Kind::HerestringRedirect => {
                let (text, from_output) = herestring(child, source, &mut stdin_uses);
                stdin_text = text;
                fed |= from_output;
            }
            Kind::FileRedirect => {
                fed |= reads_from_commands(child, source);
                redirect(child, source, out);
            }
            _ => {}
        }
    }
    let body = node.child_by_field_name("body");
    if body.is_none_or(|b| b.kind() != Kind::Command) {
        out.statement_uses.append(&mut stdin_uses);
    }
    for child in node.children() {
        if child.kind() == Kind::Command && body == Some(child) {
            let uses = std::mem::take(&mut stdin_uses);
            push_simple(child, source, fed, stdin_text.clone(), uses, out);
            walk_words(child, source, out);
        } else if child.kind() != Kind::FileRedirect {
            walk(child, source, out, fed);
        }
    }
}

/// `for x in WORDS`: the literal words are named, and `x` holds one of
/// them (`for x; do`: the positional parameters, not followed).
fn walk_for(node: Node<'_>, source: &str, out: &mut Parsed) {
    let Some(variable) = node.child_by_field_name("variable") else {
        return;
    };
    let name = text(variable, source).to_owned();
    let values: Vec<Node<'_>> = node.children_by_field_name("value").collect();
    let mut origin = if values.is_empty() {
        Origin::Unknown
    } else {
        Origin::Literal
    };
    for value in values {
        match literal(value, source) {
            Some(word) => out.named_words.push(word),
            None => origin = origin.max(origin_of(Some(value), source)),
        }
    }
    out.values.assign(&name, node.start_byte(), origin);
    out.assignments.push(name);
}

/// `[ ... ]`, `[[ ... ]]`, `export`, `declare`, `unset` and the like as
/// the simple commands they are: the keyword (`test` for a bracket) and
/// the words after it.
fn walk_keyword_command(node: Node<'_>, source: &str, out: &mut Parsed, piped_into: bool) {
    out.unparseable |= redirect_read_as_comparison(node, source) || brackets_glued(node, source);
    let mut words = Vec::new();
    let mut uses = Vec::new();
    for child in node.children() {
        if child.is_named() && glued_descriptor(child, source) {
            continue;
        }
        if child.is_named() {
            words.push(literal(child, source).or_else(|| {
                (child.kind() == Kind::VariableAssignment).then(|| text(child, source).to_owned())
            }));
            if child.kind() == Kind::VariableAssignment
                && let Some(name) = assigned_name(child, source)
            {
                assign(child, &name, source, out);
            }
            uses_in(child, source, &mut uses);
            walk_inner(child, source, out);
        } else if words.is_empty() {
            let keyword = text(child, source);
            let name = if keyword.starts_with('[') {
                "test"
            } else {
                keyword
            };
            words.push(Some(name.to_owned()));
        }
    }
    out.uses.push((out.commands.len(), uses));
    out.commands.push(Simple {
        words,
        stdin_text: None,
        piped_into,
        assignments: Vec::new(),
        expanded: Vec::new(),
    });
}

/// Whether a `[ ... ]` holds `<` or `>` outside quotes: bash reads them as
/// redirects there (`[ x > .git/config ]` truncates the file, `[ x > ../y ]`
/// writes outside the root), the grammar as comparisons, as they are in
/// `[[ ... ]]`. The command is then not read as bash reads it.
fn redirect_read_as_comparison(node: Node<'_>, source: &str) -> bool {
    let whole = text(node, source);
    whole.starts_with('[') && !whole.starts_with("[[") && holds_angle_token(node, source)
}

/// Whether a `[ ... ]` or `[[ ... ]]` has a bracket glued to a word: bash
/// reads `[[`, `]]`, `[` and its last argument `]` only as words of their
/// own, so `[[x > .git/config ]]` runs a command named `[[x` whose redirect
/// truncates the file, where the grammar reads a test of `x`.
fn brackets_glued(node: Node<'_>, source: &str) -> bool {
    let whole = text(node, source);
    if !whole.starts_with('[') {
        return false;
    }
    let double = whole.starts_with("[[");
    let (open, close) = if double { ("[[", "]]") } else { ("[", "]") };
    let blank = |c: Option<char>| matches!(c, Some(' ' | '\t' | '\n'));
    let Some(inner) = whole
        .strip_prefix(open)
        .and_then(|rest| rest.strip_suffix(close))
    else {
        return true;
    };
    let after = source
        .get(node.end_byte()..)
        .and_then(|rest| rest.chars().next());
    !blank(inner.chars().next())
        || !blank(inner.chars().next_back())
        || after
            .is_some_and(|c| !matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|' | ')' | '<' | '>'))
}

/// Whether an operator token `<` or `>` is anywhere below `node`, outside
/// the substitutions (their own redirects are read with their commands).
fn holds_angle_token(node: Node<'_>, source: &str) -> bool {
    node.children().any(|child| {
        if child.is_named() {
            !matches!(
                child.kind(),
                Kind::CommandSubstitution | Kind::ProcessSubstitution
            ) && holds_angle_token(child, source)
        } else {
            text(child, source).contains(['<', '>'])
        }
    })
}

/// A `<<< word` redirect: the text it feeds (when it is a literal), the
/// expansions it makes (added to `uses`), and whether any of them is a
/// command's output, which makes the command's stdin another's.
fn herestring(node: Node<'_>, source: &str, uses: &mut Vec<Use>) -> (Option<String>, bool) {
    let text = node
        .named_children()
        .last()
        .and_then(|w| literal(w, source));
    let before = uses.len();
    uses_in(node, source, uses);
    (text, uses[before..].contains(&Use::Output))
}

fn walk_children(node: Node<'_>, source: &str, out: &mut Parsed, piped_into: bool) {
    for child in node.children() {
        walk(child, source, out, piped_into);
    }
}

/// Notes where an assignment's value comes from; a literal value is a
/// named word.
fn assign(node: Node<'_>, name: &str, source: &str, out: &mut Parsed) {
    let value = node.child_by_field_name("value");
    if let Some(word) = value.and_then(|v| literal(v, source)) {
        out.named_words.push(word);
    }
    // A value set for one command only (`x=a cmd > "$x"`) is not the one
    // its own redirect expands: only a statement's own assignment counts.
    let prefix = node
        .parent()
        .is_some_and(|parent| parent.kind() == Kind::Command);
    let spelled = value.filter(|_| !prefix).and_then(|v| literal(v, source));
    out.values
        .assign_value(name, node.start_byte(), origin_of(value, source), spelled);
}

/// The variable a `NAME=value` (or `NAME[i]=value`) assigns.
fn assigned_name(node: Node<'_>, source: &str) -> Option<String> {
    let name = node
        .child_by_field_name("name")
        .or_else(|| node.named_child(0))?;
    let name = match name.kind() {
        Kind::Subscript => name.child_by_field_name("name").unwrap_or(name),
        _ => name,
    };
    Some(text(name, source).to_owned())
}

/// Walks the parts of a command's words for nested commands.
fn walk_inner(node: Node<'_>, source: &str, out: &mut Parsed) {
    match node.kind() {
        Kind::CommandSubstitution | Kind::ProcessSubstitution => {
            for child in node.children() {
                walk(child, source, out, false);
            }
        }
        Kind::FileRedirect => redirect(node, source, out),
        _ => {
            for child in node.children() {
                walk_inner(child, source, out);
            }
        }
    }
}

fn redirect(node: Node<'_>, source: &str, out: &mut Parsed) {
    // The operator, with any part the grammar could not read (`<>` comes
    // out as `<` and an error holding `>`).
    let operator: String = {
        node.children()
            .filter(|c| !c.is_named() || c.is_error())
            .map(|c| text(c, source))
            .collect()
    };
    let Some(destination) = node.child_by_field_name("destination") else {
        return;
    };
    // `cmd > out ARG`: bash passes ARG to the command, the grammar reads it
    // as part of the redirect. Nothing after it can be trusted to be read
    // as bash reads it (`sort > /dev/null -o ../x` writes `../x`).
    if node.children_by_field_name("destination").nth(1).is_some() {
        out.unparseable = true;
    }
    walk_inner(destination, source, out);
    let target = literal(destination, source);
    // `>&2`, `2>&1`, `<&3`, `>&-` name descriptors; `>& FILE` is a file,
    // and so is the target of `&>` and `&>>` (stdout and stderr both),
    // digits or not: `&>2` writes the file `2`.
    let descriptor = operator.ends_with('&')
        && (destination.kind() == Kind::Number || target.as_deref() == Some("-"));
    if descriptor {
        return;
    }
    if operator.contains('>') {
        if target.is_none()
            && let Some(spelt) = pieces(destination, source)
        {
            out.pending_writes.push((out.writes.len(), spelt));
        }
        out.writes.push(target.clone());
    }
    if operator.contains('<') {
        out.reads.push(target);
    }
}

/// Whether a redirect feeds stdin from a process substitution (`< <(cmd)`).
fn reads_from_commands(node: Node<'_>, source: &str) -> bool {
    let input = node
        .children()
        .any(|c| !c.is_named() && text(c, source).contains('<'));
    input
        && node
            .child_by_field_name("destination")
            .is_some_and(|d| d.kind() == Kind::ProcessSubstitution)
}

fn heredoc_body(node: Node<'_>, source: &str) -> Option<String> {
    let body = node.children().find(|c| c.kind() == Kind::HeredocBody)?;
    Some(text(body, source).to_owned())
}

/// Reads one simple command and adds it to `out`, with the expansions of
/// its words (and of the heredoc or here-string `uses` came from).
fn push_simple(
    node: Node<'_>,
    source: &str,
    mut piped_into: bool,
    stdin_text: Option<String>,
    mut uses: Vec<Use>,
    out: &mut Parsed,
) {
    let mut words = Vec::new();
    let mut assignments = Vec::new();
    let mut stdin_text = stdin_text;
    for child in node.children() {
        match child.kind() {
            _ if !child.is_named() => {
                if child.kind() == Kind::MatchOperator {
                    words.push(Some(text(child, source).to_owned()));
                }
            }
            Kind::HerestringRedirect => {
                let (text, from_output) = herestring(child, source, &mut uses);
                stdin_text = text;
                piped_into |= from_output;
            }
            Kind::FileRedirect => piped_into |= reads_from_commands(child, source),
            // `VAR=x cmd`: the assignment is not part of argv, and sets
            // the variable for the program only, not for these words.
            Kind::VariableAssignment => {
                if let Some(word) = child
                    .child_by_field_name("value")
                    .and_then(|v| literal(v, source))
                {
                    out.named_words.push(word);
                }
                uses_in(child, source, &mut uses);
                assignments.extend(assigned_name(child, source));
            }
            Kind::Comment => {}
            Kind::CommandName => {
                let word = child.named_children().next();
                if word.is_some_and(|w| glued_descriptor(w, source)) {
                    continue;
                }
                words.push(word.and_then(|w| argument(w, source)));
            }
            _ if glued_descriptor(child, source) => {}
            _ => {
                uses_in(child, source, &mut uses);
                words.push(argument(child, source));
            }
        }
    }
    if words.first().is_some_and(|w| w.as_deref() == Some("read")) {
        // What `read` assigns is data from its stdin.
        for name in read_variables(&words[1..]) {
            out.values.assign(&name, node.start_byte(), Origin::Data);
        }
    }
    out.uses.push((out.commands.len(), uses));
    out.commands.push(Simple {
        words,
        stdin_text,
        piped_into,
        assignments,
        expanded: Vec::new(),
    });
}

/// Whether `node` is the descriptor of the redirection right after it,
/// which the grammar read as a word: bash takes digits that touch a `<` or
/// `>` for the descriptor the redirection applies to (`ls 0>/dev/null` runs
/// `ls` alone, its stdin replaced), where the grammar reads a lone `0` as a
/// number argument.
fn glued_descriptor(node: Node<'_>, source: &str) -> bool {
    let word = text(node, source);
    !word.is_empty()
        && word.bytes().all(|b| b.is_ascii_digit())
        && matches!(source.as_bytes().get(node.end_byte()), Some(b'<' | b'>'))
}

/// A word as an argument: its literal text, `QUOTED_EXPANSION` and the
/// string's text for one word of unknown text (a double-quoted string
/// with an expansion, a process substitution's `/dev/fd/N`), or `None` (it
/// may split into several words).
fn argument(node: Node<'_>, source: &str) -> Option<String> {
    literal(node, source).or_else(|| match node.kind() {
        Kind::String => {
            let quoted = text(node, source);
            let inner = quoted
                .strip_prefix('"')
                .and_then(|q| q.strip_suffix('"'))
                .unwrap_or(quoted);
            Some(format!("{QUOTED_EXPANSION}{inner}"))
        }
        Kind::ProcessSubstitution => Some(QUOTED_EXPANSION.to_owned()),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::known::known_kind_ids;
    use super::*;

    fn argvs(source: &str) -> Vec<Vec<Option<String>>> {
        parse(source)
            .commands
            .into_iter()
            .map(|c| c.words)
            .collect()
    }

    fn lit(words: &[&str]) -> Vec<Option<String>> {
        words.iter().map(|w| Some((*w).to_owned())).collect()
    }

    #[test]
    fn a_double_quoted_string_of_whitespace_keeps_it() {
        for (source, words) in [
            ("echo \" \"", &["echo", " "][..]),
            ("echo x\" \"y", &["echo", "x y"]),
            ("find . \"\"\" \"t", &["find", ".", " t"]),
            ("echo \"\t \"x", &["echo", "\t x"]),
            ("echo \" a \"", &["echo", " a "]),
        ] {
            assert_eq!(argvs(source), [lit(words)], "{source}");
        }
    }

    #[test]
    fn every_simple_command_is_found() {
        let found = argvs("cd x && rm -rf / ; echo $(whoami) `id` | wc -l\nls <(cat a)");
        assert!(found.contains(&lit(&["cd", "x"])));
        assert!(found.contains(&lit(&["rm", "-rf", "/"])));
        assert!(found.contains(&lit(&["whoami"])));
        assert!(found.contains(&lit(&["id"])));
        assert!(found.contains(&lit(&["wc", "-l"])));
        assert!(found.contains(&lit(&["cat", "a"])));
        assert_eq!(found.len(), 8, "{found:?}");
    }

    /// The grammar reads `==` and `=~` after a command's word as the
    /// operator of a comparison; bash passes them like any other word.
    #[test]
    fn a_comparison_operator_in_a_command_is_a_word() {
        for (source, words) in [
            ("cat =~ .git/config", &["cat", "=~", ".git/config"][..]),
            ("test a == b", &["test", "a", "==", "b"]),
            ("echo x =~ a.b y", &["echo", "x", "=~", "a.b", "y"]),
            ("echo x ==y", &["echo", "x", "==y"]),
        ] {
            assert!(!parse(source).unparseable, "{source}");
            assert_eq!(argvs(source), [lit(words)], "{source}");
        }
        for source in [
            "awk =='NR1' f",
            "echo =~\"x\"",
            "echo x ==$y",
            "echo a =='b'c",
            "cat =~'.git/config'",
        ] {
            assert!(parse(source).unparseable, "{source}");
        }
    }

    #[test]
    fn quoting_is_undone_and_expansions_are_unknown() {
        assert_eq!(
            argvs(r#"'r'"m" -rf \/ $'\x72m' "$HOME""#),
            vec![vec![
                Some("rm".into()),
                Some("-rf".into()),
                Some("/".into()),
                Some("rm".into()),
                Some(format!("{QUOTED_EXPANSION}$HOME"))
            ]]
        );
        assert_eq!(argvs("$CMD arg"), vec![vec![None, Some("arg".into())]]);
    }

    #[test]
    fn redirect_targets_are_writes() {
        let parsed = parse("echo a > out.txt 2>&1; cat < in >> log; ls &> all");
        assert_eq!(
            parsed.writes,
            vec![
                Some("out.txt".into()),
                Some("log".into()),
                Some("all".into())
            ]
        );
    }

    /// Digits that touch a redirection are its descriptor, as bash reads
    /// them, even the lone `0` the grammar takes for an argument; apart
    /// from it, or quoted, or in a longer word, they are an argument.
    #[test]
    fn digits_touching_a_redirection_are_its_descriptor_not_an_argument() {
        let words =
            |command: &str| -> Vec<Option<String>> { parse(command).commands.remove(0).words };
        let some = |list: &[&str]| -> Vec<Option<String>> {
            list.iter().map(|w| Some((*w).to_owned())).collect()
        };
        for (command, argv) in [
            ("ls 0>/dev/null", &["ls"][..]),
            ("ls 0</dev/null", &["ls"]),
            ("ls 0>>log", &["ls"]),
            ("cat 0<<<hi", &["cat"]),
            ("echo a 0>&2", &["echo", "a"]),
            ("ls 0 >x", &["ls", "0"]),
            ("ls \"0\">x", &["ls", "0"]),
            ("ls a0>x", &["ls", "a0"]),
        ] {
            assert_eq!(words(command), some(argv), "{command}");
        }
        assert_eq!(
            parse("ls 0>/dev/null").writes,
            vec![Some("/dev/null".into())]
        );
    }

    /// A word ending in digits before a redirection is an argument to
    /// bash, whatever it starts with; the grammar takes `-ab2` for the
    /// descriptor, so the command is not read as bash reads it.
    #[test]
    fn a_descriptor_that_is_not_digits_alone_is_not_read_as_bash_reads_it() {
        for command in [
            "echo x -ab2>/dev/null",
            "grep x -nopaque2>&1",
            "echo -n2>&1",
            "echo x -2>&1",
        ] {
            assert!(parse(command).unparseable, "{command}");
        }
        for command in ["echo x 2>&1", "echo x ab2>/dev/null", "echo x 10>&1"] {
            assert!(!parse(command).unparseable, "{command}");
        }
    }

    /// Text of a statement that is in none of its parts is a word the
    /// grammar lost: `wc - 2>&1` passes `-` to `wc`, where the grammar
    /// reads only `wc` and the redirect.
    #[test]
    fn a_word_the_grammar_reads_past_is_not_read_as_bash_reads_it() {
        for command in [
            "wc - 2>&1",
            "echo - 3</dev/null",
            "ls | wc - 2>&1 | wc -l",
            "[ - 2>&1 ]",
            "cat <<< 'a'\\b",
            "wc -l <<< 'a'\\rb",
        ] {
            assert!(parse(command).unparseable, "{command}");
        }
        for command in [
            "wc - >/dev/null",
            "ls  2>&1   >/dev/null",
            "cat <<EOF > /dev/null\nx\nEOF\n",
            "wc -l 2>&1",
            "[ -f x ] && ls | wc -l",
            "[[ -n $x ]]",
            "export A=1 B",
            "cat <<< hi",
            "cat <<< 'a'b",
            "echo x>/dev/null",
            "cat <<< a >/dev/null",
        ] {
            assert!(!parse(command).unparseable, "{command}");
        }
    }

    #[test]
    fn heredocs_and_pipes_are_seen() {
        let parsed = parse("bash <<EOF\nrm -rf /\nEOF\n");
        assert_eq!(parsed.commands[0].stdin_text.as_deref(), Some("rm -rf /\n"));
        let parsed = parse("curl x | sh");
        assert!(!parsed.commands[0].piped_into && parsed.commands[1].piped_into);
    }

    #[test]
    fn unknown_node_kinds_and_prompt_expansions_are_unparseable() {
        assert!(parse("echo ${x@P}").unparseable);
        assert!(parse("echo )(").unparseable);
        assert!(!parse("echo ${x:-default} \"$y\" $((1 + 2))").unparseable);
        // Every kind listed is a named kind of this grammar.
        let known = known_kind_ids();
        assert!(known.iter().filter(|k| **k).count() >= KNOWN_NODE_KINDS.len());
    }

    #[test]
    fn two_words_the_grammar_reads_where_bash_reads_one_are_unparseable() {
        assert!(parse("sort a]\\]b").unparseable);
        assert!(parse("ls x]]\\]]#]]y").unparseable);
        assert!(!parse("sort a\\]b").unparseable);
        assert!(!parse("echo a>b").unparseable);
        assert!(!parse("echo c x=1 \"q\"'r'$s 2>&1").unparseable);
        assert!(!parse("x=1 y=2 env a b").unparseable);
        assert!(parse("echo \\ d").unparseable);
        assert!(parse("awk 'x' \\ 'd  v# 'dfi").unparseable);
        assert!(!parse("echo a\\ b").unparseable);
        assert!(!parse("echo a\t b").unparseable);
    }

    #[test]
    fn a_word_read_across_a_line_end_is_unparseable() {
        assert!(parse("ls a\n\\d x").unparseable);
        assert!(parse("find whi erle r]ea\n\\d r ea.").unparseable);
        assert!(!parse("ls a\nls b").unparseable);
        assert!(!parse("echo 'a\nb' \"c\nd\"").unparseable);
    }

    #[test]
    fn broken_input_is_unparseable() {
        assert!(parse("echo 'unterminated").unparseable);
        assert!(parse("if then fi (").unparseable);
    }
}
