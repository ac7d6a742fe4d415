//! The mount points of this process's mount namespace, from
//! `/proc/self/mountinfo`, parents before children.

use std::path::PathBuf;

/// Every mount point, in the order the kernel lists them. The fifth field
/// of a line is the mount point, with space, tab, newline and backslash
/// written as three octal digits after a backslash.
pub fn mount_points(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(unescape(field)))
        .collect()
}

fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        let octal = bytes.get(index + 1..index + 4).filter(|digits| {
            bytes[index] == b'\\' && digits.iter().all(|d| (b'0'..=b'7').contains(d))
        });
        match octal {
            Some(digits) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                index += 4;
            }
            None => {
                out.push(bytes[index]);
                index += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_are_read_with_their_escapes() {
        let text = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n\
                    35 22 0:30 / /mnt/my\\040disk rw - tmpfs tmpfs rw\n\
                    36 22 0:31 / /odd\\134name rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mount_points(text),
            ["/", "/mnt/my disk", "/odd\\name"].map(PathBuf::from)
        );
    }
}
