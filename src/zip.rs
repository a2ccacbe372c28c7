//! A zip archive of a few small files, stored (not compressed), byte-identical for the
//! same files: every timestamp is the zip epoch (1980-01-01 00:00), every entry a plain
//! file (0644) or folder (0755), in the order given, no extra fields, no symlinks. Pure:
//! entries in, bytes out.
//!
//! Written by hand rather than with the `zip` crate: the plugin bundle is five short text
//! files, and byte-identical rebuilds need every header field fixed, which is the whole
//! of the format for stored entries (about as many lines as configuring the crate would
//! take, and no dependency tree).

/// One entry: a path with `/` separators (a folder ends in `/`), and its bytes.
pub struct Entry {
    pub name: String,
    pub bytes: Vec<u8>,
}

const DOS_DATE_1980_01_01: u16 = (1 << 5) | 1;
const MADE_BY_UNIX_V2_0: u16 = (3 << 8) | 20;
const NEEDS_V2_0: u16 = 20;

/// The archive holding `entries`, in that order.
pub fn archive(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for entry in entries {
        let offset = u32::try_from(out.len()).expect("a small archive");
        let name = entry.name.as_bytes();
        let crc = crc32(&entry.bytes);
        let size = u32::try_from(entry.bytes.len()).expect("a small file");
        let is_dir = entry.name.ends_with('/');
        // Local file header.
        put32(&mut out, 0x0403_4b50);
        put16(&mut out, NEEDS_V2_0);
        put16(&mut out, 0); // flags
        put16(&mut out, 0); // stored
        put16(&mut out, 0); // time 00:00:00
        put16(&mut out, DOS_DATE_1980_01_01);
        put32(&mut out, crc);
        put32(&mut out, size);
        put32(&mut out, size);
        put16(&mut out, u16::try_from(name.len()).expect("a short name"));
        put16(&mut out, 0); // no extra field
        out.extend_from_slice(name);
        out.extend_from_slice(&entry.bytes);
        // Its central directory record.
        let mode: u32 = if is_dir { 0o040_755 } else { 0o100_644 };
        let dos_dir_bit: u32 = if is_dir { 0x10 } else { 0 };
        put32(&mut central, 0x0201_4b50);
        put16(&mut central, MADE_BY_UNIX_V2_0);
        put16(&mut central, NEEDS_V2_0);
        put16(&mut central, 0);
        put16(&mut central, 0);
        put16(&mut central, 0);
        put16(&mut central, DOS_DATE_1980_01_01);
        put32(&mut central, crc);
        put32(&mut central, size);
        put32(&mut central, size);
        put16(
            &mut central,
            u16::try_from(name.len()).expect("a short name"),
        );
        put16(&mut central, 0); // extra
        put16(&mut central, 0); // comment
        put16(&mut central, 0); // disk
        put16(&mut central, 0); // internal attributes
        put32(&mut central, (mode << 16) | dos_dir_bit);
        put32(&mut central, offset);
        central.extend_from_slice(name);
    }
    let central_at = u32::try_from(out.len()).expect("a small archive");
    let central_len = u32::try_from(central.len()).expect("a small archive");
    let count = u16::try_from(entries.len()).expect("a few entries");
    out.extend_from_slice(&central);
    // End of central directory.
    put32(&mut out, 0x0605_4b50);
    put16(&mut out, 0);
    put16(&mut out, 0);
    put16(&mut out, count);
    put16(&mut out, count);
    put32(&mut out, central_len);
    put32(&mut out, central_at);
    put16(&mut out, 0);
    out
}

fn put16(out: &mut Vec<u8>, value: u16) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

/// CRC-32 (IEEE 802.3, reflected), as zip uses it.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_of_the_check_string() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn the_same_entries_give_the_same_bytes() {
        let entries = || {
            vec![
                Entry {
                    name: "a/".into(),
                    bytes: Vec::new(),
                },
                Entry {
                    name: "a/b.txt".into(),
                    bytes: b"hello\n".to_vec(),
                },
            ]
        };
        let one = archive(&entries());
        assert_eq!(one, archive(&entries()));
        assert_eq!(&one[..4], b"PK\x03\x04");
        assert_eq!(&one[one.len() - 22..one.len() - 18], b"PK\x05\x06");
    }
}
