//! A tree-sitter parse laid out flat, in one walk, for the rest of the
//! gate to read. Every reading of the tree (the check that each node is of
//! a kind the gate knows, the walk into commands, the words of each
//! command, the expansions in each word) went through tree-sitter's own
//! cursor, which steps through the grammar's hidden nodes at every move
//! and is allocated anew for every list of children (a typical command's
//! judgement took 195,600 instructions that way, 150,400 read flat). Here
//! each visible node is read once, with its kind, flags, bytes and field,
//! and linked to its parent, first child and next sibling; the readers
//! move by index.

use std::num::NonZeroU16;
use std::sync::OnceLock;

use tree_sitter::{Language, Tree};

use super::kind::{Kind, kind_of_id};

/// No node: the root's parent, a last child's next sibling.
const NONE: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
struct Entry {
    kind_id: u16,
    kind: Kind,
    named: bool,
    /// An `ERROR` node.
    error: bool,
    /// A node the parser made up (`MISSING`).
    missing: bool,
    start: usize,
    end: usize,
    /// The field this node is in its parent (0: none).
    field: u16,
    parent: u32,
    first_child: u32,
    next_sibling: u32,
    named_children: u32,
}

/// A parse, flat: its nodes in the order a walk from the root meets them.
#[derive(Debug)]
pub(super) struct Flat {
    entries: Vec<Entry>,
}

impl Flat {
    /// Reads every visible node of `tree` once.
    pub fn of(tree: &Tree) -> Self {
        let mut entries: Vec<Entry> = Vec::with_capacity(64);
        let mut cursor = tree.walk();
        // For each node whose children are being read: its index and its
        // last child read so far.
        let mut open: Vec<(u32, u32)> = Vec::new();
        loop {
            let node = cursor.node();
            let index = index_of(entries.len());
            entries.push(Entry {
                kind_id: node.kind_id(),
                kind: kind_of_id(node.kind_id()),
                named: node.is_named(),
                error: node.is_error(),
                missing: node.is_missing(),
                start: node.start_byte(),
                end: node.end_byte(),
                field: cursor.field_id().map_or(0, NonZeroU16::get),
                parent: open.last().map_or(NONE, |&(parent, _)| parent),
                first_child: NONE,
                next_sibling: NONE,
                named_children: 0,
            });
            if let Some((parent, last)) = open.last_mut() {
                let before = *last;
                *last = index;
                if let Some(previous) = entries.get_mut(at(before)) {
                    previous.next_sibling = index;
                }
                if let Some(parent) = entries.get_mut(at(*parent)) {
                    if parent.first_child == NONE {
                        parent.first_child = index;
                    }
                    parent.named_children += u32::from(node.is_named());
                }
            }
            if cursor.goto_first_child() {
                open.push((index, NONE));
                continue;
            }
            while !cursor.goto_next_sibling() {
                if !cursor.goto_parent() {
                    return Self { entries };
                }
                open.pop();
            }
        }
    }

    pub fn root(&self) -> Node<'_> {
        Node {
            flat: self,
            index: 0,
        }
    }

    /// Every node, each once, parents before their children.
    pub fn nodes(&self) -> impl Iterator<Item = Node<'_>> {
        (0..self.entries.len()).map(|index| Node {
            flat: self,
            index: index_of(index),
        })
    }
}

/// A command is at most `MAX_COMMAND_BYTES`, so its nodes are far fewer
/// than `u32::MAX`; one past it would read as no node.
fn index_of(position: usize) -> u32 {
    u32::try_from(position).unwrap_or(NONE)
}

fn at(index: u32) -> usize {
    usize::try_from(index).unwrap_or(usize::MAX)
}

/// One node of a [`Flat`] parse.
#[derive(Debug, Clone, Copy)]
pub(super) struct Node<'t> {
    flat: &'t Flat,
    index: u32,
}

impl PartialEq for Node<'_> {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::eq(self.flat, other.flat) && self.index == other.index
    }
}

impl Eq for Node<'_> {}

impl<'t> Node<'t> {
    /// Every node's index was made by its `Flat` from an entry it holds
    /// (the root's, a parent's, a child's or a sibling's), so it is in
    /// bounds.
    fn entry(self) -> Entry {
        self.flat.entries[at(self.index)]
    }

    fn at(self, index: u32) -> Option<Node<'t>> {
        (index != NONE).then_some(Node {
            flat: self.flat,
            index,
        })
    }

    pub fn kind(self) -> Kind {
        self.entry().kind
    }

    /// The grammar's own id of the kind, which tells aliases apart.
    pub fn kind_id(self) -> u16 {
        self.entry().kind_id
    }

    pub fn is_named(self) -> bool {
        self.entry().named
    }

    pub fn is_error(self) -> bool {
        self.entry().error
    }

    /// An `ERROR` node or a `MISSING` one.
    pub fn is_broken(self) -> bool {
        let entry = self.entry();
        entry.error || entry.missing
    }

    pub fn start_byte(self) -> usize {
        self.entry().start
    }

    pub fn end_byte(self) -> usize {
        self.entry().end
    }

    pub fn byte_range(self) -> std::ops::Range<usize> {
        let entry = self.entry();
        entry.start..entry.end
    }

    pub fn parent(self) -> Option<Node<'t>> {
        self.at(self.entry().parent)
    }

    pub fn named_child_count(self) -> usize {
        at(self.entry().named_children)
    }

    /// Every child, named or not, in order.
    pub fn children(self) -> Children<'t> {
        Children {
            next: self.at(self.entry().first_child),
        }
    }

    pub fn named_children(self) -> impl Iterator<Item = Node<'t>> {
        self.children().filter(|child| child.is_named())
    }

    pub fn named_child(self, n: usize) -> Option<Node<'t>> {
        self.named_children().nth(n)
    }

    /// The children in the field `name`, in order.
    pub fn children_by_field_name(self, name: &str) -> impl Iterator<Item = Node<'t>> {
        let field = field_id(name);
        self.children()
            .filter(move |child| field != 0 && child.entry().field == field)
    }

    pub fn child_by_field_name(self, name: &str) -> Option<Node<'t>> {
        self.children_by_field_name(name).next()
    }
}

pub(super) struct Children<'t> {
    next: Option<Node<'t>>,
}

impl<'t> Iterator for Children<'t> {
    type Item = Node<'t>;

    fn next(&mut self) -> Option<Node<'t>> {
        let node = self.next?;
        self.next = node.at(node.entry().next_sibling);
        Some(node)
    }
}

/// The grammar's id of a field name (0 for a name it has not), looked up
/// once per name.
fn field_id(name: &str) -> u16 {
    static FIELDS: OnceLock<Vec<(String, u16)>> = OnceLock::new();
    let fields = FIELDS.get_or_init(|| {
        let language: Language = tree_sitter_bash::LANGUAGE.into();
        (1..=language.field_count())
            .filter_map(|id| {
                let id = u16::try_from(id).ok()?;
                Some((language.field_name_for_id(id)?.to_owned(), id))
            })
            .collect()
    });
    fields
        .iter()
        .find_map(|(field, id)| (field == name).then_some(*id))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use tree_sitter::Parser;

    use super::*;

    fn parsed(source: &str) -> Tree {
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .unwrap();
        parser.parse(source, None).unwrap()
    }

    /// The flat parse says of every node what tree-sitter's own nodes say.
    fn same(ours: Node<'_>, theirs: tree_sitter::Node<'_>, language: &Language) {
        assert_eq!(ours.kind_id(), theirs.kind_id());
        assert_eq!(ours.kind(), kind_of_id(theirs.kind_id()));
        assert_eq!(ours.is_named(), theirs.is_named());
        assert_eq!(ours.is_error(), theirs.is_error());
        assert_eq!(ours.is_broken(), theirs.is_error() || theirs.is_missing());
        assert_eq!(ours.byte_range(), theirs.byte_range());
        assert_eq!(ours.named_child_count(), theirs.named_child_count());
        let mut cursor = theirs.walk();
        let children: Vec<_> = theirs.children(&mut cursor).collect();
        assert_eq!(ours.children().count(), children.len());
        for (our, their) in ours.children().zip(children) {
            assert_eq!(our.parent(), Some(ours));
            same(our, their, language);
        }
        for id in 1..=language.field_count() {
            let name = language
                .field_name_for_id(u16::try_from(id).unwrap())
                .unwrap();
            let mut cursor = theirs.walk();
            let theirs: Vec<_> = theirs
                .children_by_field_name(name, &mut cursor)
                .map(|n| n.byte_range())
                .collect();
            let ours: Vec<_> = ours
                .children_by_field_name(name)
                .map(Node::byte_range)
                .collect();
            assert_eq!(ours, theirs, "field {name}");
        }
    }

    #[test]
    fn every_node_reads_as_tree_sitter_reads_it() {
        let language: Language = tree_sitter_bash::LANGUAGE.into();
        for source in [
            "git status --short && cargo test --workspace 2>&1 | tail -n 20",
            "for f in a b \"$c\"; do x=$(cat \"$f\") rm -- \"${f}\" > out.$f; done <<< \"$(ls)\"",
            "f() { [ -e a ] && echo \"a $b\" | sort -o x; }; cat <<EOF\n$HOME\nEOF\n",
            "echo $'\\x72m' 'raw' {1..3} ${a:-b} $((1+2)) <(ls) >&2 2>/dev/null",
            "if true; then case $x in a) y=1;; esac; fi; while read l; do :; done < f",
            "echo (( broken",
            "",
        ] {
            let tree = parsed(source);
            let flat = Flat::of(&tree);
            assert_eq!(flat.root().parent(), None);
            let mut cursor = tree.walk();
            let mut count = 0;
            loop {
                count += 1;
                if cursor.goto_first_child() || cursor.goto_next_sibling() {
                    continue;
                }
                while !cursor.goto_next_sibling() && cursor.goto_parent() {}
                if cursor.node() == tree.root_node() {
                    break;
                }
            }
            assert_eq!(flat.nodes().count(), count, "{source}");
            same(flat.root(), tree.root_node(), &language);
        }
    }
}
