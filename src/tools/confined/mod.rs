//! Filesystem access by handle: what a tool acts on is the object its
//! decision was about.
//!
//! A path a tool was allowed is opened relative to a folder handle (the
//! root's for a path inside it, `/` for the rare path a team lets a tool
//! reach outside), one step below the other, never following a symlink and
//! never stepping out of that folder. The decision's path is canonical, so it
//! holds no symlink: one met now was swapped in after the decision, and the
//! call is refused. What was opened is then checked on the handle (`fstat`):
//! its kind, its link count, and that it is the very object (device and
//! inode) the decision's facts were taken from. Reads are bounded and never
//! block (a FIFO is opened non-blocking and refused as not a file); a file is
//! replaced by a temporary file created in the opened folder and renamed
//! relative to it, so nothing is ever written through a name.

mod open;
mod read;
mod walk;
mod write;

pub use open::{open_file, open_folder};
pub use read::read_text;
pub use walk::{Found, WalkEnd, walk_files};
pub use write::{remove_file, replace_file};
