//! Validating a compressed batch's records as they are decompressed, in a fixed amount of
//! memory: a Produce checks every record's framing, and holding the whole decompressed
//! batch (up to the bound, 64 MiB) per concurrent request is what made a decompression bomb
//! expensive. Values and keys are skipped, never stored; header keys are checked for UTF-8
//! piece by piece. The verdicts are those of [`RecordIter::validate`](crate::RecordIter) on
//! the decompressed bytes, as accept or refuse (a test and the fuzz target compare them; the
//! reasons may differ, since a stream's length is not known up front).

use std::io::{BufRead, BufReader, Read};

use crate::compression::corrupt;
use crate::{decompress, Compression, RecordIter, RecordsError, Result};

/// Bytes of decompressed output read at a time.
const CHUNK_BYTES: usize = 64 << 10;

/// Checks the framing of `count` records in `data` compressed with `codec`, decompressing at
/// most `limit_bytes`, in memory that does not grow with the batch (snappy and uncompressed
/// data aside: a snappy block states its length, and its ratio is at most about 21).
pub fn validate_compressed(codec: Compression, data: &[u8], count: i32, limit_bytes: usize) -> Result<()> {
    let reader: Box<dyn Read + '_> = match codec {
        Compression::None | Compression::Snappy => {
            let plain = decompress(codec, data, limit_bytes)?;
            return RecordIter::new(&plain, count).validate();
        }
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(data)),
        Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(data)),
        Compression::Zstd => {
            Box::new(zstd::stream::read::Decoder::with_buffer(data).map_err(|e| corrupt(codec, e))?)
        }
    };
    let mut s = Stream {
        input: BufReader::with_capacity(CHUNK_BYTES, reader),
        codec,
        limit_bytes,
        read: 0,
        index: 0,
    };
    for _ in 0..count.max(0) {
        if s.at_end()? {
            return Err(s.bad("fewer records than records_count"));
        }
        s.record()?;
        s.index += 1;
    }
    if !s.at_end()? {
        return Err(s.bad("bytes left after the last record"));
    }
    Ok(())
}

struct Stream<R> {
    input: BufReader<R>,
    codec: Compression,
    limit_bytes: usize,
    /// Decompressed bytes consumed so far.
    read: usize,
    index: usize,
}

/// Why a field could not be read: the stream failed (corrupt data, the limit), or the
/// record's own bytes ran out (a framing error with this reason).
enum Short {
    Failed(RecordsError),
    Framing(&'static str),
}

impl<R: Read> Stream<R> {
    fn bad(&self, reason: &'static str) -> RecordsError {
        RecordsError::BadRecord {
            index: self.index,
            reason,
        }
    }

    fn fill(&mut self) -> Result<&[u8]> {
        let codec = self.codec;
        self.input.fill_buf().map_err(|e| corrupt(codec, e))
    }

    fn consume(&mut self, n: usize) -> Result<()> {
        self.input.consume(n);
        self.read += n;
        if self.read > self.limit_bytes {
            return Err(RecordsError::DecompressedTooLarge {
                limit_bytes: self.limit_bytes,
            });
        }
        Ok(())
    }

    fn at_end(&mut self) -> Result<bool> {
        Ok(self.fill()?.is_empty())
    }

    /// One byte of the record that has `left` bytes left (`None`: of the whole stream).
    fn byte(&mut self, left: &mut Option<usize>, reason: &'static str) -> Result<u8, Short> {
        if *left == Some(0) {
            return Err(Short::Framing(reason));
        }
        let b = match self.fill().map_err(Short::Failed)?.first() {
            Some(&b) => b,
            None => return Err(Short::Framing(reason)),
        };
        self.consume(1).map_err(Short::Failed)?;
        if let Some(l) = left {
            *l -= 1;
        }
        Ok(b)
    }

    /// A zigzag varint of at most `max_bytes` bytes, as `crate::varint` reads them.
    fn varint(
        &mut self,
        left: &mut Option<usize>,
        max_bytes: usize,
        reason: &'static str,
    ) -> Result<i64, Short> {
        let mut raw = 0u64;
        for i in 0..max_bytes {
            let b = self.byte(left, reason)?;
            raw |= ((b & 0x7f) as u64) << (7 * i);
            if b & 0x80 == 0 {
                if max_bytes == 5 && raw > u32::MAX as u64 {
                    return Err(Short::Framing(reason));
                }
                return Ok(((raw >> 1) as i64) ^ -((raw & 1) as i64));
            }
        }
        Err(Short::Framing(reason))
    }

    fn varint32(&mut self, left: &mut Option<usize>, reason: &'static str) -> Result<i32, Short> {
        // A 5-byte varint's raw value fits in 32 bits, so its zigzag decoding fits an i32.
        Ok(self.varint(left, 5, reason)? as i32)
    }

    /// Skips `n` bytes of the record, checking them as UTF-8 if asked.
    fn skip(&mut self, left: &mut Option<usize>, n: usize, utf8: bool) -> Result<(), Short> {
        // An incomplete UTF-8 sequence at a chunk's end, carried into the next.
        let mut carry: Vec<u8> = Vec::new();
        let mut to_go = n;
        while to_go > 0 {
            let chunk = self.fill().map_err(Short::Failed)?;
            if chunk.is_empty() {
                return Err(Short::Framing("length exceeds the record"));
            }
            let take = chunk.len().min(to_go);
            if utf8 {
                carry.extend_from_slice(&chunk[..take]);
                match std::str::from_utf8(&carry) {
                    Ok(_) => carry.clear(),
                    Err(e) if e.error_len().is_none() => {
                        carry.drain(..e.valid_up_to());
                    }
                    Err(_) => return Err(Short::Framing("header key is not UTF-8")),
                }
            }
            self.consume(take).map_err(Short::Failed)?;
            to_go -= take;
        }
        if !carry.is_empty() {
            return Err(Short::Framing("header key is not UTF-8"));
        }
        if let Some(l) = left {
            *l -= n;
        }
        Ok(())
    }

    /// A length-prefixed byte string of the record; -1 is null. Returns whether it was.
    fn bytes(&mut self, left: &mut Option<usize>, utf8: bool) -> Result<bool, Short> {
        let len = self.varint32(left, "bad length varint")?;
        if len == -1 {
            return Ok(false);
        }
        let rest = left.expect("fields are read within a record");
        if len < 0 || len as usize > rest {
            return Err(Short::Framing("length exceeds the record"));
        }
        self.skip(left, len as usize, utf8)?;
        Ok(true)
    }

    fn record(&mut self) -> Result<()> {
        self.record_fields().map_err(|e| match e {
            Short::Failed(e) => e,
            Short::Framing(reason) => self.bad(reason),
        })
    }

    fn record_fields(&mut self) -> Result<(), Short> {
        let len = self.varint32(&mut None, "bad record length varint")?;
        if len <= 0 {
            return Err(Short::Framing("record length exceeds the batch"));
        }
        // A record claiming more than the stream holds shows as a field running out of bytes
        // (RecordIter, which knows the section's length, says so up front; both refuse it).
        let mut left = Some(len as usize);
        self.byte(&mut left, "record length exceeds the batch")?; // attributes
        self.varint(&mut left, 10, "bad timestamp delta")?;
        self.varint32(&mut left, "bad offset delta")?;
        self.bytes(&mut left, false)?; // key
        self.bytes(&mut left, false)?; // value
        let header_count = self.varint32(&mut left, "bad header count")?;
        let rest = left.expect("within a record");
        if header_count < 0 || header_count as usize > rest / 2 {
            return Err(Short::Framing("header count exceeds the record"));
        }
        for _ in 0..header_count {
            if !self.bytes(&mut left, true)? {
                return Err(Short::Framing("null header key"));
            }
            self.bytes(&mut left, false)?;
        }
        if left != Some(0) {
            return Err(Short::Framing("record length disagrees with its fields"));
        }
        Ok(())
    }
}
