//! The files a Codex `apply_patch` touches. Codex sends the patch text
//! itself; each `*** Add File:`, `*** Update File:`, `*** Delete File:` and
//! `*** Move to:` header names a file the patch writes, and each is judged
//! as a harness tool call on that file.

use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PatchError {
    #[error("the patch names no file")]
    Empty,
    #[error("line {0}: a file header names no path")]
    Malformed(usize),
}

/// What a patch does to one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileChange {
    Add,
    Update,
    Delete,
    /// The new name of an updated file.
    MoveTo,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PatchedFile {
    pub change: FileChange,
    pub path: String,
}

impl FileChange {
    /// Every harness tool a change can be judged as.
    pub const TOOLS: [&'static str; 3] = ["Write", "Edit", "DeleteFile"];

    /// The harness tool that does the same to one file.
    pub fn tool(self) -> &'static str {
        match self {
            FileChange::Add | FileChange::MoveTo => Self::TOOLS[0],
            FileChange::Update => Self::TOOLS[1],
            FileChange::Delete => Self::TOOLS[2],
        }
    }
}

impl PatchedFile {
    /// The harness tool that does the same to this file.
    pub fn tool(&self) -> &'static str {
        self.change.tool()
    }
}

const HEADERS: [(&str, FileChange); 4] = [
    ("*** Add File:", FileChange::Add),
    ("*** Update File:", FileChange::Update),
    ("*** Delete File:", FileChange::Delete),
    ("*** Move to:", FileChange::MoveTo),
];

/// Every file the patch writes, in order. Lines inside a hunk start with a
/// space, `+`, `-` or `@@`, so a header is never mistaken for content.
pub fn patch_files(text: &str) -> Result<Vec<PatchedFile>, PatchError> {
    let mut files = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let Some((change, rest)) = HEADERS
            .iter()
            .find_map(|(header, change)| line.strip_prefix(header).map(|rest| (*change, rest)))
        else {
            continue;
        };
        let path = rest.trim();
        if path.is_empty() {
            return Err(PatchError::Malformed(index + 1));
        }
        files.push(PatchedFile {
            change,
            path: path.to_owned(),
        });
    }
    if files.is_empty() {
        return Err(PatchError::Empty);
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_is_a_file_and_content_is_not() {
        let patch = "*** Begin Patch\n*** Add File: new.txt\n+*** Delete File: not-a-header\n\
                     *** Update File: src/a.rs\n*** Move to: src/b.rs\n@@\n-x\n+y\n\
                     *** Delete File: old.txt\n*** End Patch\n";
        let files = patch_files(patch).unwrap();
        let names: Vec<(&str, &str)> = files.iter().map(|f| (f.tool(), f.path.as_str())).collect();
        assert_eq!(
            names,
            [
                ("Write", "new.txt"),
                ("Edit", "src/a.rs"),
                ("Write", "src/b.rs"),
                ("DeleteFile", "old.txt")
            ]
        );
    }

    #[test]
    fn a_patch_without_files_or_with_an_empty_header_is_refused() {
        assert_eq!(
            patch_files("*** Begin Patch\n*** End Patch"),
            Err(PatchError::Empty)
        );
        assert_eq!(
            patch_files("*** Add File:   \n"),
            Err(PatchError::Malformed(1))
        );
    }
}
