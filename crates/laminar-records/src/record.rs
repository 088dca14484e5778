//! Records inside a batch. Every length is checked against the bytes that remain before
//! anything is sliced, so a hostile count or length cannot cause a large allocation.

use crate::varint::{read_varint, read_varlong};
use crate::{RecordsError, Result};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub attributes: i8,
    pub timestamp_delta: i64,
    pub timestamp_ms: i64,
    pub offset_delta: i32,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<Header>,
}

/// Iterates the records of an uncompressed record section. It yields an error, then stops,
/// at the first malformed record, and an error if the records do not fill the section
/// exactly.
pub struct RecordIter<'a> {
    buf: &'a [u8],
    pos: usize,
    index: usize,
    count: usize,
    base_timestamp: Option<i64>,
    failed: bool,
}

impl<'a> RecordIter<'a> {
    pub fn new(buf: &'a [u8], count: i32) -> RecordIter<'a> {
        RecordIter {
            buf,
            pos: 0,
            index: 0,
            count: count.max(0) as usize,
            base_timestamp: None,
            failed: false,
        }
    }

    /// Timestamps in yielded records are `base + delta`; without a base they are the delta.
    pub fn with_base_timestamp(mut self, base_timestamp_ms: i64) -> Self {
        self.base_timestamp = Some(base_timestamp_ms);
        self
    }

    fn fail(&mut self, reason: &'static str) -> Option<Result<Record>> {
        self.failed = true;
        Some(Err(RecordsError::BadRecord {
            index: self.index,
            reason,
        }))
    }

    fn varint(&mut self, end: usize) -> Option<i32> {
        let (v, n) = read_varint(&self.buf[self.pos..end])?;
        self.pos += n;
        Some(v)
    }

    fn varlong(&mut self, end: usize) -> Option<i64> {
        let (v, n) = read_varlong(&self.buf[self.pos..end])?;
        self.pos += n;
        Some(v)
    }

    /// Reads a length-prefixed byte string; -1 means null. Returns a slice of the input.
    fn bytes(&mut self, end: usize) -> std::result::Result<Option<&'a [u8]>, &'static str> {
        let len = self.varint(end).ok_or("bad length varint")?;
        if len == -1 {
            return Ok(None);
        }
        if len < 0 || len as usize > end - self.pos {
            return Err("length exceeds the record");
        }
        let buf: &'a [u8] = self.buf;
        let out = &buf[self.pos..self.pos + len as usize];
        self.pos += len as usize;
        Ok(Some(out))
    }

    /// Parses one record, borrowing from the input. With `headers` absent, header
    /// framing is checked but nothing is collected (validation allocates nothing).
    fn parse_one(
        &mut self,
        mut headers: Option<&mut Vec<Header>>,
    ) -> std::result::Result<RawRecord<'a>, &'static str> {
        let len = self.varint(self.buf.len()).ok_or("bad record length varint")?;
        if len <= 0 || len as usize > self.buf.len() - self.pos {
            return Err("record length exceeds the batch");
        }
        let end = self.pos + len as usize;
        let attributes = self.buf[self.pos] as i8;
        self.pos += 1;
        let timestamp_delta = self.varlong(end).ok_or("bad timestamp delta")?;
        let offset_delta = self.varint(end).ok_or("bad offset delta")?;
        let key = self.bytes(end)?;
        let value = self.bytes(end)?;
        let header_count = self.varint(end).ok_or("bad header count")?;
        // Each header takes at least two bytes, so a count above that bound is a lie.
        if header_count < 0 || header_count as usize > (end - self.pos) / 2 {
            return Err("header count exceeds the record");
        }
        for _ in 0..header_count {
            let key = self.bytes(end)?.ok_or("null header key")?;
            let key = std::str::from_utf8(key).map_err(|_| "header key is not UTF-8")?;
            let value = self.bytes(end)?;
            if let Some(h) = headers.as_deref_mut() {
                h.push(Header {
                    key: key.to_string(),
                    value: value.map(<[u8]>::to_vec),
                });
            }
        }
        if self.pos != end {
            return Err("record length disagrees with its fields");
        }
        Ok(RawRecord {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
        })
    }

    /// Checks the framing of every record without allocating.
    pub fn validate(mut self) -> Result<()> {
        while self.index < self.count {
            if self.pos >= self.buf.len() {
                return Err(RecordsError::BadRecord {
                    index: self.index,
                    reason: "fewer records than records_count",
                });
            }
            self.parse_one(None).map_err(|reason| RecordsError::BadRecord {
                index: self.index,
                reason,
            })?;
            self.index += 1;
        }
        if self.pos != self.buf.len() {
            return Err(RecordsError::BadRecord {
                index: self.index,
                reason: "bytes left after the last record",
            });
        }
        Ok(())
    }
}

struct RawRecord<'a> {
    attributes: i8,
    timestamp_delta: i64,
    offset_delta: i32,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
}

impl Iterator for RecordIter<'_> {
    type Item = Result<Record>;

    fn next(&mut self) -> Option<Result<Record>> {
        if self.failed {
            return None;
        }
        if self.index == self.count {
            if self.pos != self.buf.len() {
                return self.fail("bytes left after the last record");
            }
            return None;
        }
        if self.pos >= self.buf.len() {
            return self.fail("fewer records than records_count");
        }
        let mut headers = Vec::new();
        match self.parse_one(Some(&mut headers)) {
            Ok(r) => {
                self.index += 1;
                Some(Ok(Record {
                    attributes: r.attributes,
                    timestamp_delta: r.timestamp_delta,
                    timestamp_ms: self.base_timestamp.unwrap_or(0).wrapping_add(r.timestamp_delta),
                    offset_delta: r.offset_delta,
                    key: r.key.map(<[u8]>::to_vec),
                    value: r.value.map(<[u8]>::to_vec),
                    headers,
                }))
            }
            Err(reason) => self.fail(reason),
        }
    }
}
