//! Zigzag varints as Kafka's record format uses them (protobuf encoding).

/// Decodes a zigzag varint of at most 5 bytes. Returns the value and the bytes consumed.
pub fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let (raw, n) = read_unsigned(buf, 5)?;
    let raw = u32::try_from(raw).ok()?;
    Some((((raw >> 1) as i32) ^ -((raw & 1) as i32), n))
}

/// Decodes a zigzag varlong of at most 10 bytes.
pub fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let (raw, n) = read_unsigned(buf, 10)?;
    Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), n))
}

fn read_unsigned(buf: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut value = 0u64;
    for (i, &byte) in buf.iter().take(max_bytes).enumerate() {
        value |= ((byte & 0x7f) as u64) << (7 * i);
        if byte & 0x80 == 0 {
            return Some((value, i + 1));
        }
    }
    None
}

pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for v in [
            0i64,
            1,
            -1,
            63,
            -64,
            64,
            300,
            -300,
            i32::MAX as i64,
            i32::MIN as i64,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Vec::new();
            write_varlong(&mut out, v);
            assert_eq!(read_varlong(&out), Some((v, out.len())));
            if let Ok(v32) = i32::try_from(v) {
                let mut out = Vec::new();
                write_varint(&mut out, v32);
                assert_eq!(read_varint(&out), Some((v32, out.len())));
            }
        }
        assert_eq!(read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), None);
        assert_eq!(read_varint(&[0x80]), None);
    }
}
