//! A bounds-checked reader for Kafka's primitive types.
//!
//! Every length and count read off the wire is checked against the bytes that remain before
//! anything is allocated or sliced: an array of `n` elements needs at least `n` bytes, so a
//! count larger than what is left is rejected at once (Kafka's CVE-2022-34917 was an
//! allocation from an untrusted count).
//!
//! That alone still lets a frame decode into many times its size: an empty string is two
//! bytes on the wire and a struct of several words in memory (a 64 MiB Metadata request of
//! 32M empty names took 9.2 GiB). So every allocation a decoder makes (an array's elements
//! at their size in memory, a string's bytes) is also charged, before it is made, against
//! what the frame may decode into: [`DECODED_BYTES_PER_FRAME_BYTE`] times its size plus
//! [`DECODED_SLACK_BYTES`]. Record data is not charged: it stays a slice of the frame.

use bytes::{Buf, Bytes};

use crate::ProtocolError;

pub type Result<T> = std::result::Result<T, ProtocolError>;

/// The most tagged fields one structure may carry; more is a flood, not a request.
pub const TAGGED_FIELDS_MAX: u32 = 64;

/// What a frame may decode into on the heap, per byte of the frame, beyond the frame itself.
/// The densest real requests (OffsetCommit, Fetch with many partitions and short names) take
/// under twice their size; [`DECODED_SLACK_BYTES`] covers small requests of small fields.
pub const DECODED_BYTES_PER_FRAME_BYTE: usize = 2;
/// What any frame may decode into on top of [`DECODED_BYTES_PER_FRAME_BYTE`] times its size.
#[cfg(not(fuzzing))]
pub const DECODED_SLACK_BYTES: usize = 16 << 20;
/// Under coverage-guided fuzzing the slack is small, so that the fuzzer's small inputs reach
/// the bound; the fuzz target (`fuzz/fuzz_targets/request_decoders.rs`) counts every byte a
/// decode allocates and checks it against the bound: nothing may be allocated uncharged.
#[cfg(fuzzing)]
pub const DECODED_SLACK_BYTES: usize = 64 << 10;

pub struct Reader {
    buf: Bytes,
    flexible: bool,
    /// What the structures decoded from this reader may still allocate.
    heap_left_bytes: usize,
}

impl Reader {
    pub fn new(buf: Bytes, flexible: bool) -> Reader {
        let heap_left_bytes = buf
            .len()
            .saturating_mul(DECODED_BYTES_PER_FRAME_BYTE)
            .saturating_add(DECODED_SLACK_BYTES);
        Reader {
            buf,
            flexible,
            heap_left_bytes,
        }
    }

    /// Charges `n` elements of `T` against what this frame may decode into, before they are
    /// allocated.
    pub fn charge<T>(&mut self, n: usize) -> Result<()> {
        let bytes = n.saturating_mul(std::mem::size_of::<T>());
        match self.heap_left_bytes.checked_sub(bytes) {
            Some(left) => {
                self.heap_left_bytes = left;
                Ok(())
            }
            None => Err(ProtocolError::DecodesTooLarge {
                bytes,
                left: self.heap_left_bytes,
            }),
        }
    }

    /// A nullable array's count (`None` for null), checked as [`Reader::array_len`] checks it
    /// and charged as `n` elements of `T`.
    pub fn nullable_array_len<T>(&mut self, min_element_bytes: usize) -> Result<Option<usize>> {
        let n: i64 = if self.flexible {
            self.uvarint()? as i64 - 1
        } else {
            self.i32()? as i64
        };
        if n < 0 {
            return Ok(None);
        }
        let n = n as usize;
        if n.saturating_mul(min_element_bytes.max(1)) > self.buf.remaining() {
            return Err(ProtocolError::CountTooLarge {
                count: n,
                remaining: self.buf.remaining(),
            });
        }
        self.charge::<T>(n)?;
        Ok(Some(n))
    }

    pub fn remaining(&self) -> usize {
        self.buf.remaining()
    }

    pub fn is_flexible(&self) -> bool {
        self.flexible
    }

    pub fn set_flexible(&mut self, flexible: bool) {
        self.flexible = flexible;
    }

    fn need(&self, n: usize, what: &'static str) -> Result<()> {
        if self.buf.remaining() < n {
            return Err(ProtocolError::Truncated {
                what,
                need: n,
                have: self.buf.remaining(),
            });
        }
        Ok(())
    }

    pub fn i8(&mut self) -> Result<i8> {
        self.need(1, "int8")?;
        Ok(self.buf.get_i8())
    }
    pub fn bool(&mut self) -> Result<bool> {
        Ok(self.i8()? != 0)
    }
    pub fn i16(&mut self) -> Result<i16> {
        self.need(2, "int16")?;
        Ok(self.buf.get_i16())
    }
    pub fn i32(&mut self) -> Result<i32> {
        self.need(4, "int32")?;
        Ok(self.buf.get_i32())
    }
    pub fn i64(&mut self) -> Result<i64> {
        self.need(8, "int64")?;
        Ok(self.buf.get_i64())
    }
    pub fn f64(&mut self) -> Result<f64> {
        self.need(8, "float64")?;
        Ok(self.buf.get_f64())
    }
    pub fn uuid(&mut self) -> Result<[u8; 16]> {
        self.need(16, "uuid")?;
        let mut out = [0u8; 16];
        self.buf.copy_to_slice(&mut out);
        Ok(out)
    }

    pub fn uvarint(&mut self) -> Result<u32> {
        let mut value = 0u32;
        for i in 0..5 {
            self.need(1, "unsigned varint")?;
            let b = self.buf.get_u8();
            value |= ((b & 0x7f) as u32) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(ProtocolError::Malformed("unsigned varint longer than 5 bytes"))
    }

    /// A length that is -1 for null: `INT16` in classic versions, `UNSIGNED_VARINT` minus one
    /// in flexible ones.
    fn string_len(&mut self) -> Result<i32> {
        if self.flexible {
            Ok(self.uvarint()? as i64 as i32 - 1)
        } else {
            Ok(self.i16()? as i32)
        }
    }

    fn bytes_len(&mut self) -> Result<i32> {
        if self.flexible {
            Ok((self.uvarint()? as i64 - 1) as i32)
        } else {
            self.i32()
        }
    }

    fn take(&mut self, len: i32, what: &'static str) -> Result<Bytes> {
        let len = usize::try_from(len).map_err(|_| ProtocolError::Malformed("negative length"))?;
        self.need(len, what)?;
        Ok(self.buf.split_to(len))
    }

    pub fn nullable_string(&mut self) -> Result<Option<String>> {
        let len = self.string_len()?;
        if len < 0 {
            return Ok(None);
        }
        let raw = self.take(len, "string")?;
        self.charge::<u8>(raw.len())?;
        String::from_utf8(raw.to_vec())
            .map(Some)
            .map_err(|_| ProtocolError::Malformed("string is not UTF-8"))
    }

    pub fn string(&mut self) -> Result<String> {
        self.nullable_string()?
            .ok_or(ProtocolError::Malformed("null where a string is required"))
    }

    pub fn nullable_bytes(&mut self) -> Result<Option<Bytes>> {
        let len = self.bytes_len()?;
        if len < 0 {
            return Ok(None);
        }
        self.take(len, "bytes").map(Some)
    }

    /// An array count, checked against the bytes that remain: each element takes at least
    /// `min_element_bytes`; charged as `n` elements of `T`. -1 (null) reads as 0.
    pub fn array_len<T>(&mut self, min_element_bytes: usize) -> Result<usize> {
        Ok(self.nullable_array_len::<T>(min_element_bytes)?.unwrap_or(0))
    }

    pub fn array<T>(
        &mut self,
        min_element_bytes: usize,
        mut f: impl FnMut(&mut Reader) -> Result<T>,
    ) -> Result<Vec<T>> {
        let n = self.array_len::<T>(min_element_bytes)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(f(self)?);
        }
        Ok(out)
    }

    /// Skips the tagged fields of a structure in a flexible version (none otherwise).
    pub fn tagged_fields(&mut self) -> Result<()> {
        self.tagged_fields_with(|_, _| Ok(()))
    }

    /// As [`Reader::tagged_fields`], but each field's bytes go to `known(tag, field)`, which
    /// decodes the tags it knows from its own reader and ignores the others.
    pub fn tagged_fields_with(
        &mut self,
        mut known: impl FnMut(u32, &mut Reader) -> Result<()>,
    ) -> Result<()> {
        if !self.flexible {
            return Ok(());
        }
        let n = self.uvarint()?;
        if n > TAGGED_FIELDS_MAX {
            return Err(ProtocolError::Malformed("too many tagged fields"));
        }
        for _ in 0..n {
            let tag = self.uvarint()?;
            let len = self.uvarint()?;
            let mut field = Reader::new(self.take(len as i32, "tagged field")?, true);
            known(tag, &mut field)?;
        }
        Ok(())
    }

    pub fn skip(&mut self, n: usize) -> Result<()> {
        self.need(n, "bytes")?;
        self.buf.advance(n);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_larger_than_the_frame_are_refused() {
        let mut r = Reader::new(Bytes::from_static(&[0x7f, 0xff, 0xff, 0xff, 0, 0]), false);
        assert!(matches!(
            r.array_len::<u8>(1),
            Err(ProtocolError::CountTooLarge { .. })
        ));
        let mut r = Reader::new(Bytes::from_static(&[0xff, 0xff, 0xff, 0xff, 0x0f]), true);
        assert!(r.array_len::<u8>(1).is_err());
        let mut r = Reader::new(Bytes::from_static(&[0x00, 0x05, b'a']), false);
        assert!(r.string().is_err());
    }

    /// An array whose count the bytes left allow, but whose elements would take more than
    /// the frame may decode into, is refused before anything is allocated; the same count of
    /// small elements is taken.
    #[test]
    fn arrays_that_decode_into_many_times_their_bytes_are_refused() {
        let n = 8 << 20; // two bytes each on the wire: 16 MiB
        let mut wire = (n as i32).to_be_bytes().to_vec();
        wire.resize(4 + 2 * n, 0);
        let wire = Bytes::from(wire);
        let mut r = Reader::new(wire.clone(), false);
        assert!(matches!(
            r.array_len::<[u8; 48]>(2),
            Err(ProtocolError::DecodesTooLarge { .. })
        ));
        let mut r = Reader::new(wire, false);
        assert_eq!(r.array_len::<u16>(2).unwrap(), n);
    }

    #[test]
    fn tagged_field_floods_are_refused() {
        let mut r = Reader::new(Bytes::from(vec![0xff, 0x01]), true);
        assert!(r.tagged_fields().is_err());
    }
}
