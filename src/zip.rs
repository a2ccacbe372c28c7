//! A zip archive of a few small files, stored (not compressed), byte-identical for the
//! same files: every timestamp is the zip epoch (1980-01-01 00:00), every entry a plain
//! file (0644), executable (0755) or folder (0755), in the order given, no extra fields,
//! no symlinks. Pure: entries in, bytes out.
//!
//! Written by hand rather than with the `zip` crate: the plugin bundle is five short text
//! files, and byte-identical rebuilds need every header field fixed, which is the whole
//! of the format for stored entries (about as many lines as configuring the crate would
//! take, and no dependency tree).

/// One entry: a path with `/` separators (a folder ends in `/`), its bytes, and whether
/// it is a program (mode 0755; Python's `zipfile`, which QwenPaw's installer extracts
/// with, drops the mode, so whoever runs it must set it again).
pub struct Entry {
    pub name: String,
    pub bytes: Vec<u8>,
    pub executable: bool,
}

impl Entry {
    pub fn file(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Entry {
        Entry {
            name: name.into(),
            bytes: bytes.into(),
            executable: false,
        }
    }

    pub fn dir(name: impl Into<String>) -> Entry {
        Entry::file(name, Vec::new())
    }

    pub fn program(name: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Entry {
        Entry {
            executable: true,
            ..Entry::file(name, bytes)
        }
    }
}

const DOS_DATE_1980_01_01: u16 = (1 << 5) | 1;
const MADE_BY_UNIX_V2_0: u16 = (3 << 8) | 20;
const NEEDS_V2_0: u16 = 20;

/// The archive holding `entries`, in that order.
pub fn archive(entries: &[Entry]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for entry in entries {
        // Stored entries and 32-bit fields: a zip under 4 GiB (atc's is a few MB).
        let offset = u32::try_from(out.len()).expect("an archive under 4 GiB");
        let name = entry.name.as_bytes();
        let crc = crc32(&entry.bytes);
        let size = u32::try_from(entry.bytes.len()).expect("a file under 4 GiB");
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
        let mode: u32 = match (is_dir, entry.executable) {
            (true, _) => 0o040_755,
            (false, true) => 0o100_755,
            (false, false) => 0o100_644,
        };
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

/// CRC-32 (IEEE 802.3, reflected), as zip uses it: a byte at a time through a table (the
/// bundled atc is megabytes).
fn crc32(bytes: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut i = 0;
        while i < 256 {
            let mut crc = i as u32;
            let mut bit = 0;
            while bit < 8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ 0xEDB8_8320
                } else {
                    crc >> 1
                };
                bit += 1;
            }
            table[i] = crc;
            i += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &byte in bytes {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xFF) as usize] ^ (crc >> 8);
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
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414F_A339
        );
    }

    #[test]
    fn the_same_entries_give_the_same_bytes() {
        let entries = || {
            vec![
                Entry::dir("a/"),
                Entry::file("a/b.txt", b"hello\n".to_vec()),
                Entry::program("a/run", b"#!/bin/sh\n".to_vec()),
            ]
        };
        let one = archive(&entries());
        assert_eq!(one, archive(&entries()));
        assert_eq!(&one[..4], b"PK\x03\x04");
        assert_eq!(&one[one.len() - 22..one.len() - 18], b"PK\x05\x06");
    }
}
