//! Reading an opened file, never more than a cap.

use std::fs::File;
use std::io::Read;

use rustix::fs::Stat;

use crate::tools::run::ToolFailure;

/// The text of an opened regular file of at most `cap` bytes. The size on
/// the handle is checked first, and the read stops one byte past the cap
/// whatever the size said, so a file swapped or grown after the check (a
/// sparse file of gigabytes, say) costs no more than `cap` bytes.
pub fn read_text(file: &mut File, stat: &Stat, cap: u64) -> Result<String, ToolFailure> {
    let size = u64::try_from(stat.st_size).unwrap_or(u64::MAX);
    if size > cap {
        return Err(ToolFailure::TooLarge(cap));
    }
    // Sized for what `fstat` said (at most the cap), plus the byte that
    // tells a file that grew since.
    let mut bytes = Vec::with_capacity(usize::try_from(size + 1).unwrap_or(0));
    file.take(cap + 1)
        .read_to_end(&mut bytes)
        .map_err(ToolFailure::from_io)?;
    if bytes.len() as u64 > cap {
        return Err(ToolFailure::TooLarge(cap));
    }
    String::from_utf8(bytes).map_err(|_| ToolFailure::NotText)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn stops_one_byte_past_the_cap_whatever_the_size_said() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(b"0123456789").unwrap();
        let small = rustix::fs::fstat(&file).unwrap();
        file.write_all(b"grown after the check").unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        assert_eq!(
            read_text(&mut file, &small, 10),
            Err(ToolFailure::TooLarge(10))
        );
        std::io::Seek::rewind(&mut file).unwrap();
        let now = rustix::fs::fstat(&file).unwrap();
        assert_eq!(
            read_text(&mut file, &now, 10),
            Err(ToolFailure::TooLarge(10))
        );
        std::io::Seek::rewind(&mut file).unwrap();
        assert_eq!(
            read_text(&mut file, &now, 100).unwrap(),
            "0123456789grown after the check"
        );
    }

    #[test]
    fn refuses_bytes_that_are_not_text() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[0xff, 0xfe]).unwrap();
        std::io::Seek::rewind(&mut file).unwrap();
        let stat = rustix::fs::fstat(&file).unwrap();
        assert_eq!(read_text(&mut file, &stat, 100), Err(ToolFailure::NotText));
    }
}
